package mcpbridge_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestDeleteEndsTheMCPSession: a host's DELETE of its MCP session (the
// SDK client's Close) with a call parked on an approval returns at once,
// ends the call cancelled — it never runs for nobody — and the id is
// refused from then on (404), though it carries its own state: the
// DELETE had waited until the call ended by itself (up to the approval's
// expiry), and the id kept working after it.
func TestDeleteEndsTheMCPSession(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	sid := cs.ID()
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()
	go func() {
		_, _ = cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{"why": "test"}})
	}()
	req := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool {
		_, ok := m.(*protocol.ApprovalRequested)
		return ok
	}).(*protocol.ApprovalRequested)

	closed := make(chan int, 1)
	go func() {
		r, _ := http.NewRequestWithContext(waitCtx(t), "DELETE", url, nil)
		r.Header.Set("Mcp-Session-Id", sid)
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			closed <- 0
			return
		}
		resp.Body.Close()
		closed <- resp.StatusCode
	}()
	select {
	case code := <-closed:
		if code != http.StatusNoContent && code != http.StatusOK {
			t.Fatalf("DELETE: %d", code)
		}
	case <-time.After(testutil.WaitLimit): // the approval never comes: only the DELETE's cancel ends the wait
		t.Fatal("the DELETE did not return while a call awaited approval")
	}
	out := waitEvent(t, sub, "the call's outcome", func(m protocol.Message) bool {
		o, ok := m.(*protocol.CapabilityOutcome)
		return ok && o.CallID == req.CallID
	}).(*protocol.CapabilityOutcome)
	if out.Outcome.Err == nil || out.Outcome.Err.Code != protocol.CodeCancelled {
		t.Fatalf("the parked call ended %+v, want cancelled", out.Outcome)
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("the tool ran %d times for a session that was deleted", n)
	}

	for _, method := range []string{"POST", "GET"} {
		r, _ := http.NewRequestWithContext(waitCtx(t), method, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Session-Id", sid)
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(r)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s with the deleted session's id: %d, want 404", method, resp.StatusCode)
		}
	}
}

// TestUnknownMethodIsMethodNotFound: a request of a method the endpoint
// does not know is answered with a JSON-RPC error, -32601, under its id —
// not a plain-text 400, which clients take for a transport failure.
func TestUnknownMethodIsMethodNotFound(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	status, body := rawPost(t, url, cs.ID(), `{"jsonrpc":"2.0","id":7,"method":"foo/bar"}`)
	if status != http.StatusOK || !strings.Contains(body, `"id":7`) || !strings.Contains(body, `"code":-32601`) {
		t.Fatalf("foo/bar: %d %s, want the JSON-RPC error -32601 under id 7", status, body)
	}
}

// TestOutOfOrderRequestsAreInvalid: a request before initialize (a POST
// without a session id) and a second initialize are answered -32600
// (Invalid Request) under their ids, saying what to do — the SDK sent
// code 0, which no client maps to a reason.
func TestOutOfOrderRequestsAreInvalid(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	for _, c := range []struct{ sid, body, want string }{
		{"", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "initialize first"},
		{cs.ID(), `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, "initialized already"},
	} {
		status, body := rawPost(t, url, c.sid, c.body)
		if status != http.StatusOK || !strings.Contains(body, `"id":7`) || !strings.Contains(body, `"code":-32600`) || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want -32600 under id 7 saying %q", c.body, status, body, c.want)
		}
	}
	// The session goes on.
	if _, err := cs.ListTools(waitCtx(t), nil); err != nil {
		t.Fatalf("tools/list after: %v", err)
	}
}

// rawPost posts one JSON-RPC message to url as an MCP client of the
// session sid would ("" for none): the answer's status and body.
func rawPost(t *testing.T, url, sid, message string) (int, string) {
	t.Helper()
	version := "2025-06-18"
	if sid == "" {
		version = ""
	}
	resp := postMCP(t, url, sid, version, message)
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// postMCP posts one JSON-RPC message to url with the headers of the MCP
// session sid and protocol version ("" for none); the response's body is
// closed when the test ends.
func postMCP(t *testing.T, url, sid, version, message string) *http.Response {
	t.Helper()
	r, _ := http.NewRequestWithContext(waitCtx(t), "POST", url, strings.NewReader(message))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		r.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		r.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(r)
	must(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// serveAndConnect serves s over HTTP and connects an SDK client to it:
// the endpoint's URL and the client's session.
func serveAndConnect(t *testing.T, s *session.Session) (string, *mcp.ClientSession) {
	t.Helper()
	url := serveHTTP(t, s) + "/sessions/" + s.ID() + "/mcp"
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(waitCtx(t), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	must(t, err)
	return url, cs
}
