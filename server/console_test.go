package server_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/server"
)

// consoleFixture serves a console (with a stand-in index.html) in front of
// an ops fixture's kernel.
func consoleFixture(t *testing.T, tlsOn bool) (*opsFixture, *httptest.Server) {
	t.Helper()
	f := newOpsFixture(t)
	assets := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>console</title>")}, "app.js": {Data: []byte("export {}")}}
	c := server.NewConsole(server.ConsoleOptions{Server: f.api, Tokens: f.tok, Assets: assets,
		FrameOrigins: []string{"https://frames.example.com/ignored/path", "javascript:alert(1)", "https://bad host"}})
	var ts *httptest.Server
	if tlsOn {
		ts = httptest.NewTLSServer(c)
	} else {
		ts = httptest.NewServer(c)
	}
	t.Cleanup(ts.Close)
	return f, ts
}

// signIn posts a token and returns the response and a client holding the
// cookie.
func signIn(t *testing.T, ts *httptest.Server, token, origin string) (*http.Response, *http.Client) {
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
	resp.Body.Close()
	return resp, hc
}

func TestConsoleSignIn(t *testing.T) {
	t.Run("the cookie is HttpOnly, SameSite=Strict, and Secure over TLS", func(t *testing.T) {
		for _, tlsOn := range []bool{false, true} {
			_, ts := consoleFixture(t, tlsOn)
			resp, _ := signIn(t, ts, operatorToken, ts.URL)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-in: %d", resp.StatusCode)
			}
			cs := resp.Cookies()
			if len(cs) != 1 {
				t.Fatalf("cookies %v", cs)
			}
			c := cs[0]
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tlsOn || c.Path != "/" || strings.Contains(c.Value, operatorToken) || len(c.Value) != 64 {
				t.Fatalf("TLS %v: cookie %+v", tlsOn, c)
			}
		}
	})

	_, ts := consoleFixture(t, false)
	for _, tc := range []struct {
		name, token, origin string
		want                int
	}{
		{"a client token is refused", clientToken, "", http.StatusForbidden},
		{"an app token is refused", appToken, "", http.StatusForbidden},
		{"an unknown token is refused", "not-a-token-at-all-000", "", http.StatusUnauthorized},
		{"a cross-origin sign-in is refused", operatorToken, "http://evil.example", http.StatusForbidden},
		{"a sign-in without Origin is refused", operatorToken, "-", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := tc.origin
			switch origin {
			case "":
				origin = ts.URL
			case "-":
				origin = ""
			}
			resp, _ := signIn(t, ts, tc.token, origin)
			if resp.StatusCode != tc.want || len(resp.Cookies()) != 0 {
				t.Fatalf("status %d cookies %v, want %d and none", resp.StatusCode, resp.Cookies(), tc.want)
			}
		})
	}
}

func TestConsoleAPIAndOrigin(t *testing.T) {
	f, ts := consoleFixture(t, false)
	s, release, err := f.mgr.Acquire(testutil.Context(t), "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_ = s
	_, hc := signIn(t, ts, operatorToken, ts.URL)
	get := func(t *testing.T, hc *http.Client, path string, hdr http.Header) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(testutil.Context(t), "GET", ts.URL+path, nil)
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("the cookie reaches the operator APIs; a bearer token does not", func(t *testing.T) {
		if code := get(t, hc, "/v1/sessions", nil); code != http.StatusOK {
			t.Fatalf("with the cookie: %d", code)
		}
		if code := get(t, ts.Client(), "/v1/sessions", http.Header{"Authorization": {"Bearer " + operatorToken}}); code != http.StatusUnauthorized {
			t.Fatalf("bearer on the console listener: %d, want 401", code)
		}
		if code := get(t, hc, "/console/me", nil); code != http.StatusOK {
			t.Fatalf("me: %d", code)
		}
	})

	t.Run("a state-changing request needs the console's own Origin", func(t *testing.T) {
		for _, origin := range []string{"", "http://evil.example", "null"} {
			req, _ := http.NewRequestWithContext(testutil.Context(t), "DELETE", ts.URL+"/v1/sessions/c1", nil)
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := hc.Do(req)
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

	t.Run("a cross-origin WebSocket upgrade is refused", func(t *testing.T) {
		wsURL := "ws" + strings.TrimPrefix(ts.URL, "http")
		for _, path := range []string{"/v1/sessions/c1/ws", "/v1/approvals/ws"} {
			_, resp, err := websocket.Dial(testutil.Context(t), wsURL+path, &websocket.DialOptions{HTTPClient: hc,
				HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%s cross-origin: err %v resp %v, want 403", path, err, resp)
			}
			c, _, err := websocket.Dial(testutil.Context(t), wsURL+path, &websocket.DialOptions{HTTPClient: hc,
				HTTPHeader: http.Header{"Origin": {ts.URL}}})
			if err != nil {
				t.Fatalf("%s same-origin: %v", path, err)
			}
			c.CloseNow()
		}
	})

	t.Run("an operator's WebSocket never creates a session", func(t *testing.T) {
		_, resp, err := websocket.Dial(testutil.Context(t), "ws"+strings.TrimPrefix(ts.URL, "http")+"/v1/sessions/nope/ws",
			&websocket.DialOptions{HTTPClient: hc, HTTPHeader: http.Header{"Origin": {ts.URL}}})
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
		req, _ := http.NewRequestWithContext(context.Background(), "POST", ts.URL+"/console/signout", nil)
		req.Header.Set("Origin", ts.URL)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if code := get(t, hc, "/v1/sessions", nil); code != http.StatusUnauthorized {
			t.Fatalf("after sign-out: %d", code)
		}
	})
}
