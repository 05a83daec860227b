package tools_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/brainrt/brain/examples/tools/apicall"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
)

// apiToken is the token the site's API accepts.
const apiToken = "s3cr3t-T0KEN-42"

// apiRoutes serves a small API under /api/v1/ that wants apiToken.
func apiRoutes(mux *http.ServeMux) {
	api := http.NewServeMux()
	jsonOK := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	api.HandleFunc("GET /api/v1/me", func(w http.ResponseWriter, r *http.Request) {
		jsonOK(w, 200, map[string]any{"user": "ada"})
	})
	api.HandleFunc("GET /api/v1/items", func(w http.ResponseWriter, r *http.Request) {
		jsonOK(w, 200, map[string]any{"limit": r.URL.Query().Get("limit"), "path": r.URL.Path})
	})
	// A careless server that echoes the credentials, plainly and escaped.
	api.HandleFunc("GET /api/v1/echo", func(w http.ResponseWriter, r *http.Request) {
		var escaped strings.Builder
		for _, c := range apiToken {
			fmt.Fprintf(&escaped, `\u%04x`, c)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"authorization":%q,"escaped":"%s"}`, r.Header.Get("Authorization"), escaped.String())
	})
	api.HandleFunc("GET /api/v1/echo.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "you sent %s", r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+apiToken {
			jsonOK(w, http.StatusUnauthorized, map[string]any{"error": "invalid token"})
			return
		}
		api.ServeHTTP(w, r)
	})
}

// bindings returns the binding values of api.get, leaving out the ones
// named in omit.
func bindings(token, baseURL string, omit ...string) map[string]json.RawMessage {
	b := map[string]json.RawMessage{}
	for name, v := range map[string]string{"token": token, "base_url": baseURL} {
		raw, _ := json.Marshal(v)
		b[name] = raw
	}
	for _, name := range omit {
		delete(b, name)
	}
	return b
}

// noToken fails if the token shows anywhere in an outcome.
func noToken(t testing.TB, out protocol.Outcome) {
	t.Helper()
	raw, _ := json.Marshal(out)
	if strings.Contains(string(raw), apiToken) {
		t.Errorf("the outcome shows the token: %s", raw)
	}
}

func TestAPIGet(t *testing.T) {
	envs := newBoth(t, []kernel.Provider{netProvider(siteGrants())}, nil)
	envs.MustAttach(t, kernel.Attachment{Tool: apicall.Tool, Bindings: bindings(apiToken, siteURL("/api/v1"))})
	cases := []toolstest.Case{
		{Name: "authenticated", Input: `{"path":"/me"}`, Want: `{"status":200,"json":{"user":"ada"}}`},
		{Name: "query", Input: `{"path":"/items?limit=1"}`, Want: `{"status":200,"json":{"limit":"1","path":"/api/v1/items"}}`},
		{Name: "echoed token redacted", Input: `{"path":"/echo"}`, Want: `{"status":200,"json":{"authorization":"Bearer [redacted]","escaped":"[redacted]"}}`},
		{Name: "echoed token redacted in an error", Input: `{"path":"/echo.txt"}`, WantCode: "not_json", WantMessage: []string{"Bearer [redacted]"}},
		{Name: "unknown path", Input: `{"path":"/nope"}`, WantCode: "not_json", WantMessage: []string{"404"}},
		{Name: "another host", Input: `{"path":"//evil.test/steal"}`, WantCode: "invalid_path"},
		{Name: "user info trick", Input: `{"path":"@evil.test/steal"}`, WantCode: "invalid_path"},
		{Name: "absolute URL", Input: `{"path":"http://evil.test/steal"}`, WantCode: "invalid_path"},
		{Name: "dot-dot out of the base path", Input: `{"path":"/../admin"}`, WantCode: "invalid_path"},
		{Name: "encoded dot-dot", Input: `{"path":"/%2e%2e/admin"}`, WantCode: "invalid_path"},
	}
	for i := range cases {
		cases[i].Tool = "api.get"
		cases[i].Check = noToken
	}
	envs.Run(t, cases)
}

func TestAPIGetBindings(t *testing.T) {
	t.Run("attach failures", func(t *testing.T) {
		envs := newBoth(t, []kernel.Provider{netProvider(siteGrants())}, nil)
		for _, tt := range []struct {
			name     string
			bindings map[string]json.RawMessage
			code     protocol.Code
		}{
			{"no token binding", bindings(apiToken, siteURL("/api/v1"), "token"), protocol.CodeInvalidInput},
			{"no bindings", nil, protocol.CodeInvalidInput},
			{"token of the wrong type", map[string]json.RawMessage{"token": json.RawMessage(`42`), "base_url": json.RawMessage(`"http://api.test"`)}, protocol.CodeInvalidInput},
			{"undeclared binding", map[string]json.RawMessage{"token": json.RawMessage(`"x"`), "base_url": json.RawMessage(`"http://api.test"`), "user": json.RawMessage(`"ada"`)}, protocol.CodeInvalidInput},
			{"empty token", bindings("", siteURL("/api/v1")), "invalid_binding"},
			{"base_url not http", bindings(apiToken, "ftp://api.test/"), "invalid_binding"},
			{"base_url with a query", bindings(apiToken, siteURL("/api/v1?key=1")), "invalid_binding"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				recs := envs.Attach(t, kernel.Attachment{Tool: apicall.Tool, Bindings: tt.bindings})
				for m, rec := range recs {
					if rec.OK() || rec.Failures[0].Code != tt.code {
						t.Fatalf("%s: receipt %+v, want failure code %s", m, rec, tt.code)
					}
					if strings.Contains(rec.Failures[0].Reason, apiToken) {
						t.Errorf("%s: the failure shows the token: %s", m, rec.Failures[0].Reason)
					}
				}
			})
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		envs := newBoth(t, []kernel.Provider{netProvider(siteGrants())}, nil)
		envs.MustAttach(t, kernel.Attachment{Tool: apicall.Tool, Bindings: bindings("not-the-token", siteURL("/api/v1"))})
		envs.Run(t, []toolstest.Case{
			{Name: "refused", Tool: "api.get", Input: `{"path":"/me"}`, Want: `{"status":401,"json":{"error":"invalid token"}}`},
		})
	})
	t.Run("base_url host not allowed", func(t *testing.T) {
		envs := newBoth(t, []kernel.Provider{netProvider(siteGrants())}, nil)
		envs.MustAttach(t, kernel.Attachment{Tool: apicall.Tool, Bindings: bindings(apiToken, "http://evil.test/api")})
		envs.Run(t, []toolstest.Case{
			{Name: "denied", Tool: "api.get", Input: `{"path":"/me"}`, WantCode: protocol.CodeDenied, Check: noToken},
		})
	})
}
