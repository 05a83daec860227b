package mcpbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
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

// TestRelayRefused (F19): when the kernel refuses the token (401, 403) or
// the session (404), each request of the host is answered with a JSON-RPC
// error naming the refusal, as when the kernel cannot be reached, rather
// than left unanswered; Relay goes on, and returns the refusal at the end
// of input.
func TestRelayRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"token", http.StatusUnauthorized, `{"code":"unauthorized","message":"a valid token is required"}`},
		{"side", http.StatusForbidden, `{"code":"forbidden","message":"not a model token"}`},
		{"session", http.StatusNotFound, `{"code":"not_found","message":"no session demo"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, tc.body, tc.status)
			}))
			defer ts.Close()
			in := strings.Join([]string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			}, "\n") + "\n"
			var out bytes.Buffer
			err := mcpbridge.Relay(waitCtx(t), ts.URL, strings.NewReader(in), &out, &mcpbridge.RelayOptions{Token: "wrong"})
			if err == nil || !strings.Contains(err.Error(), strconv.Itoa(tc.status)) {
				t.Errorf("Relay = %v, want the %d", err, tc.status)
			}
			got := map[string]reply{}
			for _, r := range readReplies(t, out.Bytes()) {
				got[string(r.ID)] = r
			}
			for _, id := range []string{"1", "2"} {
				r, ok := got[id]
				if !ok || r.Error == nil || !strings.Contains(r.Error.Message, "refused the MCP session") || !strings.Contains(r.Error.Message, strconv.Itoa(tc.status)) {
					t.Errorf("request %s: reply %s, want an error naming the refusal; output:\n%s", id, mustJSON(r), out.String())
				}
			}
			if len(got) != 2 {
				t.Errorf("%d replies, want 2; output:\n%s", len(got), out.String())
			}
		})
	}
}

// echoEndpoint is a stand-in for a session's MCP endpoint: it answers
// each request with an empty result under its id (as written), accepts
// notifications, and has no GET stream. It records the bodies it gets.
func echoEndpoint(t *testing.T) (url string, bodies func() []string) {
	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(body))
		mu.Unlock()
		var m map[string]json.RawMessage
		_ = json.Unmarshal(body, &m)
		if m["id"] == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m["id"]) + `,"result":{}}`))
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestRelayBadLine (F5, F9 through the bridge): a line that is not a
// JSON-RPC message MCP allows is answered by the bridge with -32700 or
// -32600, as brain mcp answers it, and never sent to the kernel; the
// requests around it are relayed.
func TestRelayBadLine(t *testing.T) {
	cases := slices.Clone(badLineCases)
	for _, id := range []string{"1.5", "9007199254740993"} {
		cases = append(cases, badLine{"id " + id, `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`, -32600, id, "id " + id})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, bodies := echoEndpoint(t)
			in := strings.Join([]string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
				tc.line,
				`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
			}, "\n") + "\n"
			var out bytes.Buffer
			if err := mcpbridge.Relay(waitCtx(t), url, strings.NewReader(in), &out, nil); err != nil {
				t.Fatalf("Relay = %v", err)
			}
			checkBadLineReplies(t, out.Bytes(), tc.code, tc.wantID, tc.inMessage, "1", "2", "4")
			if got := bodies(); len(got) != 4 {
				t.Errorf("the endpoint got %d messages, want 4: %q", len(got), got)
			}
		})
	}
}

// TestRelayUnreachable: when the kernel cannot be reached, each request is
// answered with a JSON-RPC error saying so, as when it refuses the session;
// that is no refusal, so Relay returns nil at the end of input.
func TestRelayUnreachable(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there now
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	var out bytes.Buffer
	var log testutil.LockedBuffer
	err := mcpbridge.Relay(waitCtx(t), url, strings.NewReader(in), &out, &mcpbridge.RelayOptions{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	// Ended by it, as by a refusal: brain mcp --url exits 1 saying why (it
	// exited 0 with nothing on stderr).
	if err == nil || !strings.Contains(err.Error(), "cannot reach the kernel") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Relay = %v, want the kernel unreachable", err)
	}
	if n := strings.Count(log.String(), "cannot reach the kernel"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, log.String())
	}
	rs := readReplies(t, out.Bytes())
	if len(rs) != 2 {
		t.Fatalf("%d replies, want 2; output:\n%s", len(rs), out.String())
	}
	for _, r := range rs {
		if r.Error == nil || r.Error.Code != -32603 || !strings.Contains(r.Error.Message, "brain mcp: ") {
			t.Errorf("reply %s, want -32603 saying why", mustJSON(r))
		}
	}
}
