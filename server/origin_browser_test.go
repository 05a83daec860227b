package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/browsertest"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/server"
)

// originKernel serves a kernel letting in the browser origins patterns.
func originKernel(t *testing.T, patterns ...string) (*httptest.Server, *server.Manager) {
	t.Helper()
	tokens, err := server.NewTokens(tenantTokens()...)
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(server.ManagerOptions{})
	mcpH := mcpbridge.Handler(nil, nil)
	t.Cleanup(func() { _ = mcpH.Close() })
	ts := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr, MCP: mcpH.Endpoint, OriginPatterns: patterns}))
	t.Cleanup(ts.Close)
	return ts, mgr
}

// TestBrowserOrigins: the pages of the sites a kernel lists
// (OriginPatterns: browser_origins in brain.yaml) may use it from a
// browser — their CORS preflight is answered for the API's and the MCP
// transport's headers, their responses say so and expose Mcp-Session-Id,
// their WebSockets open — and the others are refused before their session
// is made, told how a kernel lets a site in. A page of another site could
// use neither (no config said so), and its refused WebSocket left the
// session it asked for behind.
func TestBrowserOrigins(t *testing.T) {
	ts, mgr := originKernel(t, "http://app.example:*", "*.trusted.example")
	do := func(method, path, origin string, h http.Header, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	preflight := http.Header{"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"authorization,content-type,mcp-protocol-version"}}
	for _, origin := range []string{"http://app.example:3000", "https://ui.trusted.example"} {
		resp := do("OPTIONS", "/v1/sessions/c1/mcp", origin, preflight, "")
		if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") {
			t.Fatalf("preflight from %s: %d %v, want it allowed with Authorization", origin, resp.StatusCode, resp.Header)
		}
	}
	for _, origin := range []string{"http://evil.example", "https://app.example:3000", "http://trusted.example.evil"} {
		if resp := do("OPTIONS", "/v1/sessions/c1/mcp", origin, preflight, ""); resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight from %s allowed: %v", origin, resp.Header)
		}
	}
	mcpHeaders := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Authorization": {"Bearer " + tenantAModel}}
	resp := do("POST", "/v1/sessions/c1/mcp", "http://app.example:3000", mcpHeaders, initializeBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "http://app.example:3000" ||
		resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers")), "mcp-session-id") {
		t.Fatalf("initialize from a listed site: %d %v", resp.StatusCode, resp.Header)
	}

	ws := "ws" + strings.TrimPrefix(ts.URL, "http") + "/v1/sessions/"
	dial := func(id, origin string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return websocket.Dial(ctx, ws+id+"/ws?token="+tenantAClient, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
	}
	c, _, err := dial("c2", "https://ui.trusted.example")
	if err != nil {
		t.Fatalf("a listed site's WebSocket: %v", err)
	}
	c.CloseNow()
	live := mgr.Live()
	_, resp, err = dial("c3", "http://evil.example")
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another site's WebSocket: %v %v, want 403", resp, err)
	}
	var e struct{ Message string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if !strings.Contains(e.Message, "http://evil.example") || !strings.Contains(e.Message, "browser_origins") {
		t.Fatalf("another site's WebSocket refused with %q: want its Origin and how a kernel lets it in", e.Message)
	}
	if n := mgr.Live(); n != live {
		t.Fatalf("%d sessions live after the refused WebSocket, %d before: its session was made", n, live)
	}

	// A kernel listing none refuses another site's page, saying how to
	// list it.
	plain, plainMgr := originKernel(t)
	req, _ := http.NewRequest("OPTIONS", plain.URL+"/v1/sessions/c1/mcp", nil)
	req.Header = preflight.Clone()
	req.Header.Set("Origin", "http://app.example:3000")
	presp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	presp.Body.Close()
	if presp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("a kernel listing no site answered a preflight: %v", presp.Header)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, resp, err = websocket.Dial(ctx, "ws"+strings.TrimPrefix(plain.URL, "http")+"/v1/sessions/c4/ws?token="+tenantAClient,
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://app.example:3000"}}})
	if err == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another site's WebSocket on a kernel listing none: %v %v", resp, err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if !strings.Contains(e.Message, "browser_origins, docs/serve.md") || plainMgr.Live() != 0 {
		t.Fatalf("refused with %q, %d sessions made", e.Message, plainMgr.Live())
	}
}

// TestBrowserOriginsInChromium: a page of another site, in a real
// browser, initializes an MCP session over fetch (its preflight, the
// bearer token, the Mcp-Session-Id it must read) and opens a client
// WebSocket, against a kernel listing the page's origin; against one
// listing none, the browser is refused both.
func TestBrowserOriginsInChromium(t *testing.T) {
	browsertest.Require(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>app</title>`))
	}))
	defer page.Close()
	listing, _ := originKernel(t, page.URL) // the page's own origin, scheme and port
	listingNone, _ := originKernel(t)

	ctx := browsertest.Tab(t, nil)
	ctx, stop := context.WithTimeout(ctx, 90*time.Second) // Chromium's start on a loaded machine, with room
	defer stop()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Status  int    `json:"status"`
		Session string `json:"session"`
		Fetch   string `json:"fetch"`
		WS      string `json:"ws"`
	}
	try := func(kernel string) result {
		t.Helper()
		script := `(async () => {
  const base = ` + jsString(kernel) + `, out = {status: 0, session: '', fetch: '', ws: ''};
  try {
    const r = await fetch(base + '/v1/sessions/web1/mcp', {method: 'POST', body: ` + jsString(initializeBody) + `,
      headers: {'Authorization': 'Bearer ` + tenantAModel + `', 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}});
    out.status = r.status; out.session = r.headers.get('Mcp-Session-Id') || '';
  } catch (e) { out.fetch = String(e); }
  out.ws = await new Promise((done) => {
    const ws = new WebSocket(base.replace('http', 'ws') + '/v1/sessions/web2/ws?token=` + tenantAClient + `');
    ws.onmessage = (m) => { done('message: ' + String(m.data).slice(0, 40)); ws.close(); };
    ws.onclose = (e) => done('closed ' + e.code);
  });
  return out;
})()`
		got, err := chromedp.Run(ctx, chromedp.Evaluate[result](script, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := try(listing.URL); got.Status != 200 || got.Session == "" || !strings.HasPrefix(got.WS, "message: ") {
		t.Fatalf("the page against a kernel listing its origin: %+v, want the MCP session's id read and a WebSocket message", got)
	}
	if got := try(listingNone.URL); got.Fetch == "" || got.Status != 0 || got.WS != "closed 1006" {
		t.Fatalf("the page against a kernel listing no site: %+v, want the browser to refuse the fetch and the WebSocket", got)
	}
}

// jsString quotes s for a script.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
