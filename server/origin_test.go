package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMCPChecksOrigin: the MCP endpoint applies the WebSocket's Origin
// rule — a request without Origin, or from a page of the host the client
// reached, is served; a page of another site is refused 403 naming its
// Origin, and creates no session. The endpoint checked no Origin (the MCP
// transport requires servers to).
func TestMCPChecksOrigin(t *testing.T) {
	k := newTenantKernel(t)
	post := func(id, origin string) (int, string) {
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return k.sendWith("POST", "/v1/sessions/"+id+"/mcp", tenantAModel, initializeBody, h)
	}
	for _, c := range []struct{ id, origin string }{{"o1", ""}, {"o2", k.srv.URL}, {"o3", strings.ToUpper(k.srv.URL)}} {
		if status, body := post(c.id, c.origin); status != http.StatusOK {
			t.Fatalf("initialize with Origin %q: %d %s, want 200", c.origin, status, body)
		}
	}
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "null", "not a url"} {
		status, body := post("o4", origin)
		if status != http.StatusForbidden || !strings.Contains(body, "Origin") || !strings.Contains(body, origin) {
			t.Fatalf("initialize with Origin %q: %d %s, want 403 naming it", origin, status, body)
		}
	}
	if n := k.mgr.Live(); n != 3 {
		t.Fatalf("%d sessions live, want the 3 initialized: a refused initialize created its session", n)
	}
}
