package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

var consoleAssets = fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>console</title>")}, "app.js": {Data: []byte("export {}")}}

// newConsole serves a console with opts (Server, Tokens and Assets filled
// from f when unset).
func newConsole(t *testing.T, f *opsFixture, opts server.ConsoleOptions, tlsOn bool) *httptest.Server {
	t.Helper()
	if opts.Server == nil {
		opts.Server = f.api
	}
	if opts.Tokens == nil {
		opts.Tokens = f.tok
	}
	if opts.Assets == nil {
		opts.Assets = consoleAssets
	}
	c, err := server.NewConsole(opts)
	if err != nil {
		t.Fatal(err)
	}
	var ts *httptest.Server
	if tlsOn {
		ts = httptest.NewTLSServer(c)
	} else {
		ts = httptest.NewServer(c)
	}
	t.Cleanup(ts.Close)
	return ts
}

// consoleFixture serves a console (with a stand-in index.html) in front of
// an ops fixture's kernel.
func consoleFixture(t *testing.T, tlsOn bool) (*opsFixture, *httptest.Server) {
	t.Helper()
	f := newOpsFixture(t)
	return f, newConsole(t, f, server.ConsoleOptions{
		FrameOrigins: []string{"https://frames.example.com/ignored/path", "javascript:alert(1)", "https://bad host"}}, tlsOn)
}

// operatorBrowser is what a browser signed in to a console holds: the
// cookie (in a jar) and the CSRF token the page keeps.
type operatorBrowser struct {
	t    *testing.T
	ts   *httptest.Server
	hc   *http.Client
	csrf string
}

// signIn posts a token and returns the response and a client holding the
// cookie.
func signIn(t *testing.T, ts *httptest.Server, token, origin string) (*http.Response, *operatorBrowser) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := new(http.Client)
	*hc = *ts.Client() // a copy: ts.Client() is shared
	hc.Jar = jar
	req, _ := http.NewRequestWithContext(testutil.Context(t), "POST", ts.URL+"/console/signin", strings.NewReader(`{"token":"`+token+`"}`))
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Name, CSRF string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp, &operatorBrowser{t: t, ts: ts, hc: hc, csrf: body.CSRF}
}

// do sends a request as the console's page would (its Origin, the cookie
// and, unless csrf is "-", the CSRF token or csrf itself).
func (b *operatorBrowser) do(method, path, body, csrf string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequestWithContext(testutil.Context(b.t), method, b.ts.URL+path, strings.NewReader(body))
	req.Header.Set("Origin", b.ts.URL)
	switch csrf {
	case "":
		req.Header.Set("X-Brain-Csrf", b.csrf)
	case "-":
	default:
		req.Header.Set("X-Brain-Csrf", csrf)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// cookie returns the sign-in's cookie as the browser would send it.
func (b *operatorBrowser) cookie() *http.Cookie {
	u, _ := url.Parse(b.ts.URL)
	for _, c := range b.hc.Jar.Cookies(u) {
		if c.Name == "brain_console" {
			return c
		}
	}
	b.t.Fatal("no brain_console cookie")
	return nil
}

func TestConsoleSignIn(t *testing.T) {
	t.Run("the cookie is HttpOnly, SameSite=Strict, and Secure over TLS; the CSRF token is in the body only", func(t *testing.T) {
		for _, tlsOn := range []bool{false, true} {
			_, ts := consoleFixture(t, tlsOn)
			resp, b := signIn(t, ts, operatorToken, ts.URL)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-in: %d", resp.StatusCode)
			}
			cs := resp.Cookies()
			if len(cs) != 1 {
				t.Fatalf("cookies %v", cs)
			}
			c := cs[0]
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tlsOn || c.Path != "/" || strings.Contains(c.Value, operatorToken) || len(c.Value) < 64 {
				t.Fatalf("TLS %v: cookie %+v", tlsOn, c)
			}
			if len(b.csrf) != 43 || strings.Contains(c.Value, b.csrf) || strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ";"), b.csrf) {
				t.Fatalf("csrf %q, cookie %q", b.csrf, c.Value)
			}
		}
	})

	_, ts := consoleFixture(t, false)
	for _, tc := range []struct {
		name, token, origin string
		want                int
		message             string
	}{
		{"a client token is refused", clientToken, "", http.StatusForbidden, "needs an operator token"},
		{"an app token is refused", appToken, "", http.StatusForbidden, "needs an operator token"},
		{"an unknown token is refused", "not-a-token-at-all-000", "", http.StatusUnauthorized, "unknown token"},
		{"an empty token is told what to paste", "", "", http.StatusBadRequest, "paste the operator token"},
		{"a cross-origin sign-in is refused", operatorToken, "http://evil.example", http.StatusForbidden, "Origin"},
		{"a sign-in without Origin is refused", operatorToken, "-", http.StatusForbidden, "Origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := tc.origin
			switch origin {
			case "":
				origin = ts.URL
			case "-":
				origin = ""
			}
			jar, _ := cookiejar.New(nil)
			hc := &http.Client{Jar: jar}
			req, _ := http.NewRequestWithContext(testutil.Context(t), "POST", ts.URL+"/console/signin", strings.NewReader(`{"token":"`+tc.token+`"}`))
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || len(resp.Cookies()) != 0 || !strings.Contains(string(body), tc.message) || strings.Contains(string(body), "csrf") {
				t.Fatalf("status %d cookies %v body %s, want %d, none and %q", resp.StatusCode, resp.Cookies(), body, tc.want, tc.message)
			}
		})
	}
}

// TestConsoleSignInRateLimited: 2,000 wrong tokens from one address (the
// red team's 0.4 s burst) get 10 looked at; the rest, and then the right
// token from the same address, are 429 with Retry-After, their token
// never read. Another address signs in.
func TestConsoleSignInRateLimited(t *testing.T) {
	f := newOpsFixture(t)
	c, err := server.NewConsole(server.ConsoleOptions{Server: f.api, Tokens: f.tok, Assets: consoleAssets})
	if err != nil {
		t.Fatal(err)
	}
	attempt := func(addr, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://127.0.0.1:7778/console/signin", strings.NewReader(`{"token":"`+token+`"}`))
		req.RemoteAddr = addr
		req.Header.Set("Origin", "http://127.0.0.1:7778")
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		return w
	}
	counts := map[int]int{}
	for range 2000 {
		counts[attempt("10.0.0.1:4242", "guess-0123456789abcdef").Code]++
	}
	if counts[http.StatusUnauthorized] != 10 || counts[http.StatusTooManyRequests] != 1990 {
		t.Fatalf("2,000 wrong tokens: %v, want 10 looked at (401) and 1,990 refused (429)", counts)
	}
	w := attempt("10.0.0.1:5555", operatorToken) // another port, the same address
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || len(w.Result().Cookies()) != 0 ||
		!strings.Contains(w.Body.String(), "too many sign-in attempts") {
		t.Fatalf("the right token while limited: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if w := attempt("[2001:db8::1]:1", "guess-0123456789abcdef"); w.Code != http.StatusUnauthorized {
		t.Fatalf("another address: %d", w.Code)
	}
	if w := attempt("10.0.0.2:4242", operatorToken); w.Code != http.StatusOK {
		t.Fatalf("another address with the right token: %d %s", w.Code, w.Body)
	}
}

// TestConsoleHost: the console answers only to its own names, so that a
// page on an attacker's domain resolving to 127.0.0.1 (DNS rebinding)
// reads and changes nothing, even with a matching Origin.
func TestConsoleHost(t *testing.T) {
	f := newOpsFixture(t)
	c, err := server.NewConsole(server.ConsoleOptions{Server: f.api, Tokens: f.tok, Assets: consoleAssets, Hosts: []string{"Console.Example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:7778", http.StatusOK},
		{"[::1]:7778", http.StatusOK},
		{"localhost:7778", http.StatusOK},
		{"console.example.com", http.StatusOK},
		{"console.example.com.:443", http.StatusOK},
		{"rebind.attacker.example:7778", http.StatusMisdirectedRequest},
		{"127.0.0.1.attacker.example", http.StatusMisdirectedRequest},
		{"", http.StatusMisdirectedRequest},
	} {
		for _, path := range []string{"/", "/console/me"} {
			method := "GET"
			req := httptest.NewRequest(method, "http://x"+path, nil)
			req.Host = tc.host
			w := httptest.NewRecorder()
			c.ServeHTTP(w, req)
			want := tc.want
			if path == "/console/me" && want == http.StatusOK {
				want = http.StatusUnauthorized // past the host check: not signed in
			}
			if w.Code != want {
				t.Errorf("GET %s with Host %q: %d %s, want %d", path, tc.host, w.Code, w.Body, want)
			}
		}
		req := httptest.NewRequest("POST", "http://x/console/signin", strings.NewReader(`{"token":"`+operatorToken+`"}`))
		req.Host = tc.host
		req.Header.Set("Origin", "http://"+tc.host)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		if (w.Code == http.StatusOK) != (tc.want == http.StatusOK) {
			t.Errorf("sign-in with Host and Origin %q: %d %s", tc.host, w.Code, w.Body)
		}
	}
}

// TestConsoleCookieAloneOpensNothing is issue 24's finding: the console's
// cookie, which the browser sends to every port of the console's host
// (an app's render iframe server among them), replayed server-side with a
// forged Origin and Host, approved a pending call. The cookie now needs
// its sign-in's CSRF token, which no request to another port carries;
// and the kernel's own listener never accepts it.
func TestConsoleCookieAloneOpensNothing(t *testing.T) {
	f, ts := consoleFixture(t, false)
	s, release, err := f.mgr.Acquire(testutil.Context(t), "victim")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	approvalCap(t, s, "fs.delete")
	done := make(chan protocol.Outcome, 1)
	go func() {
		done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", json.RawMessage(`{"path":"/"}`))
	}()
	pending := waitPending(t, s, 1)[0]
	t.Cleanup(func() { _ = s.Cancel(pending.CallID, "test over") })
	_, op := signIn(t, ts, operatorToken, ts.URL)
	approve := `{"v":2,"id":"x","msg":{"type":"capability_approve","callId":"` + pending.CallID + `","decision":"approved","decidedBy":"attacker","inputDigest":"` + pending.InputDigest + `"}}`

	// What the attacker's server holds: the cookie, nothing else.
	stolen := op.cookie()
	replay := func(t *testing.T, base, method, path, body string, hdr http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(testutil.Context(t), method, base+path, strings.NewReader(body))
		req.AddCookie(stolen)
		req.Header.Set("Origin", ts.URL) // forged: a server may send any header
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, base, method, path, body string
		hdr                            http.Header
	}{
		{"approve through the console's /frames", ts.URL, "POST", "/v1/sessions/victim/frames", approve, nil},
		{"approve with a made-up CSRF token", ts.URL, "POST", "/v1/sessions/victim/frames", approve, http.Header{"X-Brain-Csrf": {strings.Repeat("A", 43)}}},
		{"read the sessions", ts.URL, "GET", "/v1/sessions", "", nil},
		{"read the session", ts.URL, "GET", "/v1/sessions/victim", "", nil},
		{"read who is signed in", ts.URL, "GET", "/console/me", "", nil},
		{"delete the session", ts.URL, "DELETE", "/v1/sessions/victim", "", nil},
		{"approve through the kernel's /frames", f.srv.URL, "POST", "/v1/sessions/victim/frames", approve, nil},
		{"read the kernel's sessions", f.srv.URL, "GET", "/v1/sessions", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := replay(t, tc.base, tc.method, tc.path, tc.body, tc.hdr)
			if code != http.StatusUnauthorized || strings.Contains(body, "victim") {
				t.Fatalf("%d %s, want 401", code, body)
			}
		})
	}
	t.Run("the kernel's WebSocket refuses the cookie", func(t *testing.T) {
		_, resp, err := websocket.Dial(testutil.Context(t), "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/v1/sessions/victim/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {stolen.String()}, "Origin": {f.srv.URL}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("err %v resp %v, want 401", err, resp)
		}
	})
	t.Run("the console's WebSocket refuses the cookie without the CSRF subprotocol", func(t *testing.T) {
		for _, protos := range [][]string{nil, {"brain.console"}, {"brain.console", "brain.csrf." + strings.Repeat("A", 43)}, {"brain.csrf." + op.csrf}} {
			_, resp, err := websocket.Dial(testutil.Context(t), "ws"+strings.TrimPrefix(ts.URL, "http")+"/v1/sessions/victim/ws",
				&websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {stolen.String()}, "Origin": {ts.URL}}, Subprotocols: protos})
			if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("subprotocols %q: err %v resp %v, want 401", protos, err, resp)
			}
		}
	})
	select {
	case out := <-done:
		t.Fatalf("the call ended %+v: a replayed cookie decided it", out)
	default:
	}
	if got := waitPending(t, s, 1); got[0].CallID != pending.CallID {
		t.Fatalf("pending %+v", got)
	}

	t.Run("with its CSRF token, the page's own request decides", func(t *testing.T) {
		code, body := op.do("POST", "/v1/sessions/victim/frames", approve, "")
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		out := <-done
		if out.Err != nil {
			t.Fatalf("outcome %+v", out)
		}
	})
}

func TestConsoleAPIAndOrigin(t *testing.T) {
	f, ts := consoleFixture(t, false)
	s, release, err := f.mgr.Acquire(testutil.Context(t), "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_ = s
	_, op := signIn(t, ts, operatorToken, ts.URL)

	t.Run("the cookie with its CSRF token reaches the operator APIs; a bearer token does not", func(t *testing.T) {
		if code, body := op.do("GET", "/v1/sessions", "", ""); code != http.StatusOK {
			t.Fatalf("with the cookie: %d %s", code, body)
		}
		req, _ := http.NewRequestWithContext(testutil.Context(t), "GET", ts.URL+"/v1/sessions", nil)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bearer on the console listener: %d, want 401", resp.StatusCode)
		}
		code, body := op.do("GET", "/console/me", "", "")
		var me struct {
			Name, Model  string
			FrameOrigins []string
		}
		if err := json.Unmarshal([]byte(body), &me); code != http.StatusOK || err != nil || me.Name != "ada" || me.Model != "" || strings.Contains(body, op.csrf) {
			t.Fatalf("me: %d %s", code, body)
		}
		if strings.Contains(body, "null") {
			t.Fatalf("me: no origins are [], not null: %s", body)
		}
	})

	t.Run("a refusal names what was missing or wrong", func(t *testing.T) {
		// A probe holding a good cookie without the CSRF token was told
		// only to sign in, and a Sec-Fetch-Site refusal blamed an Origin
		// header it had not sent.
		for _, tc := range []struct {
			what, csrf, want string
		}{
			{"no CSRF token", "-", "CSRF token is missing or wrong: send it in the X-Brain-Csrf header"},
			{"a wrong CSRF token", "nope", "CSRF token is missing or wrong"},
		} {
			if code, body := op.do("GET", "/v1/sessions", "", tc.csrf); code != http.StatusUnauthorized || !strings.Contains(body, tc.want) {
				t.Errorf("%s: %d %s, want 401 saying %q", tc.what, code, body, tc.want)
			}
		}
		for _, tc := range []struct {
			hdr  http.Header
			want string
		}{
			{http.Header{"Authorization": {"Bearer " + operatorToken}}, "the console takes no bearer token"},
			{http.Header{"Sec-Fetch-Site": {"same-site"}}, "Sec-Fetch-Site is same-site:"},
			{http.Header{"Origin": {"http://127.0.0.1:1"}}, "the Origin header is http://127.0.0.1:1,"},
		} {
			req, _ := http.NewRequestWithContext(testutil.Context(t), "GET", ts.URL+"/v1/sessions", nil)
			for k, v := range tc.hdr {
				req.Header[k] = v
			}
			resp, err := ts.Client().Do(req) // no cookie
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), tc.want) {
				t.Errorf("GET with %v: %d %s, want it to say %q", tc.hdr, resp.StatusCode, body, tc.want)
			}
		}
	})

	t.Run("a request from another origin is refused, even with the CSRF token", func(t *testing.T) {
		for _, hdr := range []http.Header{
			{"Origin": {"http://127.0.0.1:1"}},                     // another port: another origin
			{"Sec-Fetch-Site": {"same-site"}},                      // what a browser says for another port of this host
			{"Sec-Fetch-Site": {"cross-site"}, "Origin": {ts.URL}}, // a forged Origin, a browser's true word
		} {
			req, _ := http.NewRequestWithContext(testutil.Context(t), "GET", ts.URL+"/v1/sessions", nil)
			req.Header.Set("X-Brain-Csrf", op.csrf)
			for k, v := range hdr {
				req.Header[k] = v
			}
			resp, err := op.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("GET with %v: %d, want 403", hdr, resp.StatusCode)
			}
		}
		req, _ := http.NewRequestWithContext(testutil.Context(t), "GET", ts.URL+"/v1/sessions", nil)
		req.Header.Set("X-Brain-Csrf", op.csrf)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := op.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the page's own GET: %d", resp.StatusCode)
		}
	})

	t.Run("a state-changing request needs the console's own Origin", func(t *testing.T) {
		for _, origin := range []string{"", "http://evil.example", "null"} {
			req, _ := http.NewRequestWithContext(testutil.Context(t), "DELETE", ts.URL+"/v1/sessions/c1", nil)
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			req.Header.Set("X-Brain-Csrf", op.csrf)
			resp, err := op.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("DELETE with Origin %q: %d, want 403", origin, resp.StatusCode)
			}
		}
		if f.mgr.Live() != 1 {
			t.Fatal("a refused request deleted the session")
		}
	})

	protos := []string{"brain.console", "brain.csrf." + op.csrf}
	t.Run("a cross-origin WebSocket upgrade is refused", func(t *testing.T) {
		wsURL := "ws" + strings.TrimPrefix(ts.URL, "http")
		for _, path := range []string{"/v1/sessions/c1/ws", "/v1/approvals/ws"} {
			_, resp, err := websocket.Dial(testutil.Context(t), wsURL+path, &websocket.DialOptions{HTTPClient: op.hc,
				HTTPHeader: http.Header{"Origin": {"http://evil.example"}}, Subprotocols: protos})
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%s cross-origin: err %v resp %v, want 403", path, err, resp)
			}
			c, _, err := websocket.Dial(testutil.Context(t), wsURL+path, &websocket.DialOptions{HTTPClient: op.hc,
				HTTPHeader: http.Header{"Origin": {ts.URL}}, Subprotocols: protos})
			if err != nil {
				t.Fatalf("%s same-origin: %v", path, err)
			}
			if c.Subprotocol() != "brain.console" {
				t.Fatalf("%s: subprotocol %q, want brain.console", path, c.Subprotocol())
			}
			c.CloseNow()
		}
	})

	t.Run("an operator's WebSocket never creates a session", func(t *testing.T) {
		_, resp, err := websocket.Dial(testutil.Context(t), "ws"+strings.TrimPrefix(ts.URL, "http")+"/v1/sessions/nope/ws",
			&websocket.DialOptions{HTTPClient: op.hc, HTTPHeader: http.Header{"Origin": {ts.URL}}, Subprotocols: protos})
		if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound || f.mgr.Live() != 1 {
			t.Fatalf("err %v resp %v live %d", err, resp, f.mgr.Live())
		}
	})

	t.Run("strict CSP on every response", func(t *testing.T) {
		resp, err := ts.Client().Get(ts.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self';", "frame-src https://frames.example.com;", "frame-ancestors 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Fatalf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") || strings.Contains(csp, "javascript") || strings.Contains(csp, "bad host") {
			t.Fatalf("CSP %q", csp)
		}
		if resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("headers %v", resp.Header)
		}
	})

	t.Run("sign-out ends the cookie", func(t *testing.T) {
		if code, _ := op.do("POST", "/console/signout", "", ""); code != http.StatusNoContent {
			t.Fatalf("sign-out: %d", code)
		}
		if code, _ := op.do("GET", "/v1/sessions", "", ""); code != http.StatusUnauthorized {
			t.Fatalf("after sign-out: %d", code)
		}
	})
}

// TestConsoleFrameSrcNeverTheConsole: an iframe render source registered
// at the console's own origin is left out of frame-src (a frame of that
// origin would share the console's storage, and its CSRF token).
func TestConsoleFrameSrcNeverTheConsole(t *testing.T) {
	f := newOpsFixture(t)
	ts := newConsole(t, f, server.ConsoleOptions{}, false)
	s, release, err := f.mgr.Acquire(testutil.Context(t), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	port := ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	for i, u := range []string{ts.URL + "/index.html", "https://charts.example.com/c.html", "http://localhost:" + port + "/x.html", "http://[::1]:" + port + "/y.html"} {
		if err := s.RegisterAgent(protocol.Capability{Name: "ui.r" + string(rune('0'+i)), Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
			Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
			Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: u}, Targets: []protocol.RenderTarget{protocol.TargetChat}}},
			session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := ts.Client().Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-src https://charts.example.com;") || strings.Contains(csp, ts.URL) || strings.Contains(csp, ":"+port) {
		t.Fatalf("CSP %q: want charts.example.com and not the console's own origin under any name (localhost, [::1])", csp)
	}
}

// TestConsoleSignInSurvivesRestart: a sign-in is a cookie sealed with a
// key in the data directory (0600): a console made again on the same
// directory (a restart of brain serve) takes it; a sign-out stays signed
// out across the restart; removing the operator token from the tokens
// ends it.
func TestConsoleSignInSurvivesRestart(t *testing.T) {
	f := newOpsFixture(t)
	dir := t.TempDir()
	first := newConsole(t, f, server.ConsoleOptions{Dir: dir}, false)
	_, op := signIn(t, first, operatorToken, first.URL)
	fi, err := os.Stat(filepath.Join(dir, "console.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("console.key: %v %v", fi, err)
	}

	// The restart: a new console on the same directory, at another
	// address (the jar's cookie is sent to it by hand).
	restarted := func(t *testing.T, tokens *server.Tokens) *operatorBrowser {
		t.Helper()
		ts := newConsole(t, f, server.ConsoleOptions{Dir: dir, Tokens: tokens}, false)
		jar, _ := cookiejar.New(nil)
		u, _ := url.Parse(ts.URL)
		jar.SetCookies(u, []*http.Cookie{{Name: "brain_console", Value: op.cookie().Value}})
		hc := &http.Client{Jar: jar}
		return &operatorBrowser{t: t, ts: ts, hc: hc, csrf: op.csrf}
	}
	second := restarted(t, nil)
	if code, body := second.do("GET", "/console/me", "", ""); code != http.StatusOK || !strings.Contains(body, `"ada"`) {
		t.Fatalf("after a restart: %d %s", code, body)
	} else if !strings.Contains(body, `"frameOrigins":[]`) { // none configured or registered: [], as webComponentOrigins, not null
		t.Fatalf("after a restart, no frame origins: %s", body)
	}

	t.Run("another key refuses it", func(t *testing.T) {
		ts := newConsole(t, f, server.ConsoleOptions{Dir: t.TempDir()}, false)
		b := &operatorBrowser{t: t, ts: ts, hc: &http.Client{Jar: second.hc.Jar}, csrf: op.csrf}
		u, _ := url.Parse(ts.URL)
		b.hc.Jar.SetCookies(u, []*http.Cookie{{Name: "brain_console", Value: op.cookie().Value}})
		if code, _ := b.do("GET", "/console/me", "", ""); code != http.StatusUnauthorized {
			t.Fatalf("%d, want 401", code)
		}
	})

	t.Run("revoking the operator token ends it", func(t *testing.T) {
		others, err := server.NewTokens(server.Token{Token: clientToken, Side: "client"}, server.Token{Token: "another-operator-0123456789", Side: "operator", Name: "bob"})
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := restarted(t, others).do("GET", "/console/me", "", ""); code != http.StatusUnauthorized {
			t.Fatalf("with the operator token removed: %d, want 401", code)
		}
	})

	t.Run("a sign-out survives the restart", func(t *testing.T) {
		if code, _ := second.do("POST", "/console/signout", "", ""); code != http.StatusNoContent {
			t.Fatalf("sign-out: %d", code)
		}
		if code, _ := restarted(t, nil).do("GET", "/console/me", "", ""); code != http.StatusUnauthorized {
			t.Fatalf("signed out, then restarted: %d, want 401", code)
		}
		fi, err := os.Stat(filepath.Join(dir, "console-signouts.json"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("console-signouts.json: %v %v", fi, err)
		}
	})

	t.Run("a key file readable by others, or not a key, is refused", func(t *testing.T) {
		for _, tc := range []struct {
			data string
			mode os.FileMode
			want string
		}{
			{strings.Repeat("ab", 32) + "\n", 0o644, "readable by others"},
			{"not hex", 0o600, "64 hex digits"},
			{"abcd", 0o600, "64 hex digits"},
		} {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, "console.key"), []byte(tc.data), tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := server.NewConsole(server.ConsoleOptions{Server: f.api, Tokens: f.tok, Assets: consoleAssets, Dir: d})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%q mode %v: %v, want %q", tc.data, tc.mode, err, tc.want)
			}
		}
	})
}
