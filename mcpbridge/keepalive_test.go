package mcpbridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/session"
)

// TestCallResponseKeptAlive: the response to a tools/call that waits (for
// a person's approval, a slow tool) sends its headers with a comment every
// KeepAlive, before its result. A probe's Node host (fetch: 300 s
// for the headers) gave up on a call awaiting approval after 5 minutes,
// and brain counted its caller gone: the SDK wrote nothing, not even the
// headers, until the result.
func TestCallResponseKeptAlive(t *testing.T) {
	t.Run("headers with the first comment", func(t *testing.T) {
		resp, release := slowCall(t, 20*time.Millisecond)
		defer close(release)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
			t.Fatalf("the waiting call's response: %s %s, want 200 text/event-stream", resp.Status, ct)
		}
	})
	t.Run("a comment every KeepAlive, then the result", func(t *testing.T) {
		resp, release := slowCall(t, 20*time.Millisecond)
		lines := bufio.NewScanner(resp.Body)
		next := func() string {
			if !lines.Scan() {
				t.Fatalf("the response ended: %v", lines.Err())
			}
			return lines.Text()
		}
		for l := next(); l != ": keep-alive"; l = next() {
		}
		close(release)
		for l := next(); ; l = next() {
			if strings.HasPrefix(l, "data: ") {
				if !strings.Contains(l, `"id":2`) || !strings.Contains(l, "done") {
					t.Fatalf("the result: %s", l)
				}
				break
			}
		}
	})
}

// slowCall serves a tool that runs until release is closed, with the
// keep-alive period every, and returns its tools/call's response as soon
// as its headers are in (failing the test if they do not come while the
// tool runs).
func slowCall(t *testing.T, every time.Duration) (*http.Response, chan struct{}) {
	t.Helper()
	s := session.New("ka", nil)
	release := make(chan struct{})
	must(t, s.RegisterAgent(agentCap("slow"), session.HandlerFunc(func(ctx context.Context, _ *session.Call) (json.RawMessage, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`"done"`), nil
	})))
	h := mcpbridge.Handler(func(*http.Request) *session.Session { return s }, &mcpbridge.ServerOptions{
		HTTP: &mcp.StreamableHTTPOptions{KeepAlive: every}})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = h.Close() })
	id := rawSession(t, ts.URL)
	responses := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL,
			strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req) // returns once the headers are in
		if err != nil {
			t.Error(err)
			close(responses)
			return
		}
		responses <- resp
	}()
	resp := testutil.Recv(t, responses, "the call's response headers while the tool runs")
	if resp == nil {
		t.FailNow()
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, release
}
