package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/browsertest"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/server"
)

// originKernel serves a kernel letting in the browser origins patterns.
func originKernel(t *testing.T, patterns ...string) (*httptest.Server, *server.Manager) {
	t.Helper()
	ts, mgr, _ := originKernelLogged(t, patterns...)
	return ts, mgr
}

// originKernelLogged is originKernel with the kernel's log.
func originKernelLogged(t *testing.T, patterns ...string) (*httptest.Server, *server.Manager, *testutil.LockedBuffer) {
	t.Helper()
	tokens, err := server.NewTokens(tenantTokens()...)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	mgr := server.NewManager(server.ManagerOptions{})
	mcpH := mcpbridge.Handler(nil, nil)
	t.Cleanup(func() { _ = mcpH.Close() })
	ts := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr, MCP: mcpH.Endpoint, OriginPatterns: patterns,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}))
	t.Cleanup(ts.Close)
	return ts, mgr, logs
}

// TestBrowserOrigins: the pages of the sites a kernel lists
// (OriginPatterns: browser_origins in brain.yaml) may use it from a
// browser — their CORS preflight is answered for the API's and the MCP
// transport's headers, their responses say so and expose Mcp-Session-Id,
// their WebSockets open — and the others are refused before their session
// is made, told how a kernel lets a site in. A page of another site could
// use neither (no config said so), and its refused WebSocket left the
// session it asked for behind. The headers a page's own libraries add
// (traceparent, sentry-trace) pass a listed site's preflight, and so does
// Chromium's question for a private network; a refusal is logged once a
// minute per Origin, since the browser hides it from the page.
func TestBrowserOrigins(t *testing.T) {
	ts, mgr, logs := originKernelLogged(t, "http://app.example:*", "*.trusted.example")
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
	preflight := http.Header{"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"authorization,content-type,mcp-protocol-version,sentry-trace,traceparent"},
		"Access-Control-Request-Private-Network": {"true"}}
	for _, origin := range []string{"http://app.example:3000", "https://ui.trusted.example"} {
		resp := do("OPTIONS", "/v1/sessions/c1/mcp", origin, preflight, "")
		allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
		if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(allowed, "authorization") || !strings.Contains(allowed, "traceparent") || resp.Header.Get("Access-Control-Allow-Private-Network") != "true" {
			t.Fatalf("preflight from %s: %d %v, want it allowed with Authorization, traceparent and a private network", origin, resp.StatusCode, resp.Header)
		}
		if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Fatalf("preflight from %s allows credentials: %v", origin, resp.Header)
		}
	}
	// Any header a listed page's fetch sends, but those a node or a proxy
	// sets (a re-probe found them allowed).
	if resp := do("OPTIONS", "/v1/sessions/c1/mcp", "http://app.example:3000", http.Header{"Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"authorization,x-forwarded-host"}}, ""); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("a preflight asking for X-Forwarded-Host: %d %v, want 403 without CORS", resp.StatusCode, resp.Header)
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
	_, _, _ = dial("c3", "http://evil.example") // a minute has not passed: not logged again
	if got := strings.Count(logs.String(), `origin=http://evil.example`); got != 1 || !strings.Contains(logs.String(), "list its origin under browser_origins") {
		t.Fatalf("the refusals of http://evil.example (a preflight, two WebSockets, within a minute) logged %d times, want once:\n%s", got, logs)
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

	// Behind a reverse proxy that rewrites Host (nginx's default, Go's
	// ReverseProxy) and says which host it was reached at, a page of the
	// proxy's own origin is same-origin: it was refused 403 — and the
	// approvals' stream was still, after the session's was fixed (the
	// re-probe).
	for _, path := range []string{"/v1/sessions/c5/ws?token=" + tenantAClient, "/v1/approvals/ws?token=" + tenantOps} {
		c, _, err = websocket.Dial(ctx, "ws"+strings.TrimPrefix(plain.URL, "http")+path,
			&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://brain.example"}, "X-Forwarded-Host": {"brain.example, inner.proxy"}}})
		if err != nil {
			t.Fatalf("a same-origin page behind a proxy, %s: %v", path, err)
		}
		c.CloseNow()
	}
}

// TestRefusedOriginsLogBounded: anyone may send any Origin, token or not;
// the log of refusals holds at most originsLoggedPerWindow of them a
// minute and counts the rest (a line and a record for each of 20,000
// made-up Origins flooded the log and grew memory: a re-probe). A kernel
// listing no site logs a page's refused preflight too (it logged nothing:
// the page saw a CORS failure, the operator nothing).
func TestRefusedOriginsLogBounded(t *testing.T) {
	for _, patterns := range [][]string{{"https://app.example"}, nil} {
		ts, _, logs := originKernelLogged(t, patterns...)
		for i := range 200 {
			req, _ := http.NewRequest("OPTIONS", ts.URL+"/v1/sessions/x/mcp", nil)
			req.Header.Set("Origin", fmt.Sprintf("https://site%d.example", i))
			req.Header.Set("Access-Control-Request-Method", "POST")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if n := strings.Count(logs.String(), "a browser page of another site was refused"); n != 32 {
			t.Fatalf("patterns %v: 200 refused Origins logged %d times, want the window's 32:\n%.2000s", patterns, n, logs)
		}
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

// TestRefusedHandshakeMakesNoSession: a request to a session's WebSocket
// that is no handshake coder/websocket takes — a plain GET, a missing or
// bad key, another version — is refused (426 or 400, saying what is
// missing) before its session is made: Accept refused it after, and the
// session stayed (an adversarial probe).
func TestRefusedHandshakeMakesNoSession(t *testing.T) {
	ts, mgr := originKernel(t)
	upgrade := withHeader(withHeader(withHeader(http.Header{}, "Connection", "Upgrade"), "Upgrade", "websocket"), "Sec-WebSocket-Version", "13")
	for name, c := range map[string]struct {
		h    http.Header
		want int
	}{
		"a plain GET":     {http.Header{}, http.StatusUpgradeRequired},
		"no key":          {upgrade, http.StatusBadRequest},
		"a bad key":       {withHeader(upgrade, "Sec-WebSocket-Key", "short"), http.StatusBadRequest},
		"another version": {withHeader(withHeader(upgrade, "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), "Sec-WebSocket-Version", "8"), http.StatusBadRequest},
		"HEAD":            {withHeader(upgrade, "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), http.StatusMethodNotAllowed}, // the route's GET takes HEAD
	} {
		method := "GET"
		if name == "HEAD" {
			method = "HEAD"
		}
		req, _ := http.NewRequest(method, ts.URL+"/v1/sessions/h1/ws", nil)
		req.Header = c.h.Clone()
		req.Header.Set("Authorization", "Bearer "+tenantAClient)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.want || (e.Message == "" && method != "HEAD") || mgr.Live() != 0 {
			t.Fatalf("%s: %d %q, %d sessions live; want %d, a reason and none", name, resp.StatusCode, e.Message, mgr.Live(), c.want)
		}
	}
}

func withHeader(h http.Header, k, v string) http.Header {
	h = h.Clone()
	h.Set(k, v)
	return h
}
