package mcpbridge_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/session"
)

// One Handler serves many sessions: each endpoint lists its own session's
// capabilities, and its MCP session ids mean nothing on another's.
func TestHandlerSessions(t *testing.T) {
	a, b := session.New("a", nil), session.New("b", nil)
	must(t, a.RegisterAgent(agentCap("only.a"), returns(`"a"`, nil)))
	must(t, b.RegisterAgent(agentCap("only.b"), returns(`"b"`, nil)))
	byID := map[string]*session.Session{"a": a, "b": b}
	h := mcpbridge.Handler(func(r *http.Request) *session.Session { return byID[r.PathValue("id")] }, nil)
	mux := http.NewServeMux()
	mux.Handle("/sessions/{id}/mcp", h)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = h.Close() })
	endpoint := func(id string) string { return ts.URL + "/sessions/" + id + "/mcp" }
	connect := func(t *testing.T, id string) (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
			Connect(waitCtx(t), &mcp.StreamableClientTransport{Endpoint: endpoint(id), MaxRetries: -1}, nil)
	}

	for _, c := range []struct{ id, mine, theirs string }{{"a", "only.a", "only.b"}, {"b", "only.b", "only.a"}} {
		t.Run("lists "+c.id, func(t *testing.T) {
			cs, err := connect(t, c.id)
			must(t, err)
			defer cs.Close()
			tools := toolNames(t, cs)
			if tools[c.mine] == nil || tools[c.theirs] != nil {
				t.Fatalf("session %s lists %v", c.id, tools)
			}
		})
	}

	t.Run("endpoint for a resolved session", func(t *testing.T) {
		direct := httptest.NewServer(h.Endpoint(b))
		defer direct.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
			Connect(waitCtx(t), &mcp.StreamableClientTransport{Endpoint: direct.URL, MaxRetries: -1}, nil)
		must(t, err)
		defer cs.Close()
		if tools := toolNames(t, cs); tools["only.b"] == nil || tools["only.a"] != nil {
			t.Fatalf("Endpoint(b) lists %v", tools)
		}
	})

	t.Run("unknown session", func(t *testing.T) {
		if cs, err := connect(t, "nope"); err == nil {
			_ = cs.Close()
			t.Fatal("connected to a session that does not exist")
		}
	})

	t.Run("session id of another endpoint", func(t *testing.T) {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"v0"}}}`
		resp := post(t, endpoint("a"), "", init)
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("initialize on a: %s, session id %q", resp.Status, id)
		}
		list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
		if resp := post(t, endpoint("b"), id, list); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("a's session id on b's endpoint: %s, want 404 Not Found", resp.Status)
		}
	})

	t.Run("release", func(t *testing.T) {
		cs, err := connect(t, "a")
		must(t, err)
		defer cs.Close()
		h.Release(a)
		// The released endpoint's MCP sessions are closed: the client's
		// stream ends, and it does not reconnect (MaxRetries -1).
		ended := make(chan error, 1)
		go func() { ended <- cs.Wait() }()
		recv(t, ended, "the client's connection to end")
		if _, err := cs.ListTools(waitCtx(t), nil); err == nil {
			t.Fatal("a client session whose connection ended still answers")
		}
		// A later request for the session starts afresh (an MCP session
		// id may be resumed too: ids carry their state, sessionid.go).
		cs2, err := connect(t, "a")
		must(t, err)
		defer cs2.Close()
		if toolNames(t, cs2)["only.a"] == nil {
			t.Fatal("only.a is not listed after a fresh connect")
		}
	})
}

// post sends one JSON-RPC message as a Streamable HTTP POST.
func post(t *testing.T, url, sessionID, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(waitCtx(t), http.MethodPost, url, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}
