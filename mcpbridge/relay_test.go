package mcpbridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// relayTo connects a Go SDK client over stdio (pipes) to Relay, which
// bridges to ns's endpoint; the endpoint checks the bearer token as a
// kernel does.
func relayTo(t *testing.T, ns *nodes, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	guard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer model-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, ns.url, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(guard.Close)
	hostOut, relayIn := io.Pipe()
	relayOut, hostIn := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mcpbridge.Relay(ctx, guard.URL, hostOut, hostIn, &mcpbridge.RelayOptions{Token: "model-token"})
		_ = hostIn.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v0"}, opts).
		Connect(waitCtx(t), &mcp.IOTransport{Reader: relayOut, Writer: relayIn}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	must(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = relayIn.Close()
		cancel()
		recv(t, done, "Relay to return")
	})
	return cs
}

// TestRelay (issue 20 item 4): brain mcp --url's bridge carries a client
// capability's round trip, an approval and list_changed between a host on
// stdio and a session's endpoint.
func TestRelay(t *testing.T) {
	f := newFixture(t)
	ns := newNodes(t, f.s, 1, nil)
	changed := make(chan struct{}, 8)
	cs := relayTo(t, ns, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()

	// The client's capability: the platform answers the call.
	go func() {
		ctx := waitCtx(t)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			switch m := ev.Msg.(type) {
			case *protocol.CapabilityInvoked:
				if m.Name == "platform.react" {
					_ = f.s.Result(session.Client, &protocol.CapabilityResult{CallID: m.CallID, Result: json.RawMessage(`{"reacted":true}`)})
				}
			case *protocol.ApprovalRequested:
				_ = f.s.Approve(session.Client, &protocol.CapabilityApprove{CallID: m.CallID, Decision: protocol.DecisionApproved, InputDigest: m.InputDigest})
			}
		}
	}()
	res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "platform.react", Arguments: map[string]any{"emoji": "👍"}})
	must(t, err)
	if got := text(t, res); got != `{"reacted":true}` {
		t.Fatalf("platform.react = %q", got)
	}
	res, err = cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{}})
	must(t, err)
	if got := text(t, res); got != `{"done":true}` || f.runs.Load() != 1 {
		t.Fatalf("danger = %q, ran %d", got, f.runs.Load())
	}
	must(t, f.s.RegisterAgent(agentCap("late"), returns(`1`, nil)))
	recv(t, changed, "list_changed through the relay")
	if toolNames(t, cs)["late"] == nil {
		t.Fatal("late is not listed")
	}
}

// A refused token ends the relay with an error naming the refusal.
func TestRelayRefused(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"code":"unauthorized","message":"a valid token is required"}`, http.StatusUnauthorized)
	}))
	defer ts.Close()
	in, w := io.Pipe()
	go func() {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}` + "\n"))
	}()
	err := mcpbridge.Relay(waitCtx(t), ts.URL, in, io.Discard, &mcpbridge.RelayOptions{Token: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want the 401", err)
	}
}
