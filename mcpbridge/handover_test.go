package mcpbridge_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"

	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// nodes serves one session from several Handlers — the nodes of a cluster
// — behind one URL, which routes every request to the current owner, as a
// kernel forwards a request to the node holding the session's lease.
type nodes struct {
	s     *session.Session
	hs    []*mcpbridge.HTTPHandler
	owner atomic.Int32
	url   string
}

func newNodes(t *testing.T, s *session.Session, n int, opts *mcpbridge.ServerOptions) *nodes {
	t.Helper()
	ns := &nodes{s: s}
	for range n {
		h := mcpbridge.Handler(nil, opts)
		t.Cleanup(func() { _ = h.Close() })
		ns.hs = append(ns.hs, h)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(mcpbridge.CallerHeader, "ada") // as the kernel does once it has authenticated the token
		ns.hs[ns.owner.Load()].Endpoint(s).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ns.url = ts.URL
	return ns
}

// handover moves the session to node i: requests go there from now on,
// and the old owner releases it (its MCP sessions and streams close).
func (ns *nodes) handover(i int) {
	old := ns.owner.Swap(int32(i))
	ns.hs[old].Release(ns.s)
}

func (ns *nodes) connect(t *testing.T, opts *mcp.ClientOptions, copts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).
		Connect(waitCtx(t), &mcp.StreamableClientTransport{Endpoint: ns.url}, copts)
	must(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestHandover (issue 23, "MCP across nodes"): an MCP session opened on
// one node goes on on another after the session moves — calls answer, the
// id is the same, and list_changed reaches the client through the new
// owner's stream. Twice, so that a restored session hands over too.
func TestHandover(t *testing.T) {
	f := newFixture(t)
	ns := newNodes(t, f.s, 2, nil)
	changed := make(chan struct{}, 64)
	cs := ns.connect(t, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, nil)
	id := cs.ID()
	call := func(what string) {
		t.Helper()
		res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": what}})
		if err != nil || res.IsError {
			t.Fatalf("call %s: %v %+v", what, err, res)
		}
	}
	call("on node 0")
	for i, to := range []int{1, 0} {
		ns.handover(to)
		call("after handover")
		if cs.ID() != id {
			t.Fatalf("the MCP session id changed: %q, then %q", id, cs.ID())
		}
		name := []string{"late.one", "late.two"}[i]
		must(t, f.s.RegisterAgent(agentCap(name), returns(`"here"`, nil)))
		// list_changed must come through the new owner; one may come from
		// the restore itself (harmless), so wait until the list has it.
		deadline := time.Now().Add(waitLimit)
		for {
			recv(t, changed, "tools/list_changed after the handover")
			if toolNames(t, cs)[name] != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is not listed after list_changed", name)
			}
		}
	}
}

// An MCP session id names its brain session: restored only there.
func TestSessionIDOfAnotherSession(t *testing.T) {
	a, b := newFixture(t), session.New("t2", nil)
	na, nb := newNodes(t, a.s, 1, nil), newNodes(t, b, 1, nil)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"v0"}}}`
	resp := post(t, na.url, "", init)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, id %q", resp.Status, id)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post(t, nb.url, id, list); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a's MCP session id on b: %s, want 404", resp.Status)
	}
	na.hs[0].Release(a.s) // a's own endpoint restores it
	if resp := post(t, na.url, id, list); resp.StatusCode != http.StatusOK {
		t.Fatalf("a's MCP session id on a after a release: %s, want 200", resp.Status)
	}
	for _, bad := range []string{"nope", "b1.x.y", "b1." + strings.Repeat("A", 30) + ".!!", "b1." + strings.Repeat("A", 5000)} {
		if resp := post(t, na.url, bad, list); resp.StatusCode != http.StatusNotFound {
			t.Errorf("MCP session id %.20q: %s, want 404", bad, resp.Status)
		}
	}
}

// rawSession opens an MCP session by hand and returns its id.
func rawSession(t *testing.T, url string) string {
	t.Helper()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"v0"}}}`
	resp := post(t, url, "", init)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, id %q", resp.Status, id)
	}
	if resp := post(t, url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s", resp.Status)
	}
	return id
}

// TestCallerGoneHTTP (issue 23 item 4): a client whose HTTP request ends
// while its call awaits approval — no notifications/cancelled, the
// connection just closes — ends the call cancelled; a later approval is
// refused and the tool never runs.
func TestCallerGoneHTTP(t *testing.T) {
	f := newFixture(t)
	ns := newNodes(t, f.s, 1, nil)
	id := rawSession(t, ns.url)
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()

	ctx, cancel := context.WithCancel(waitCtx(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ns.url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"danger","arguments":{}}}`))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = resp.Body.Read(make([]byte, 1)) // the stream, until the request ends
			resp.Body.Close()
		}
		errc <- err
	}()
	ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool {
		_, ok := m.(*protocol.ApprovalRequested)
		return ok
	}).(*protocol.ApprovalRequested)
	cancel()
	recv(t, errc, "the request to end")
	out := waitEvent(t, sub, "the call's outcome", func(m protocol.Message) bool {
		o, ok := m.(*protocol.CapabilityOutcome)
		return ok && o.CallID == ar.CallID
	}).(*protocol.CapabilityOutcome)
	if out.Outcome.Err == nil || out.Outcome.Err.Code != protocol.CodeCancelled {
		t.Fatalf("outcome = %+v, want cancelled", out.Outcome)
	}
	if err := f.s.Approve(session.Client, &protocol.CapabilityApprove{CallID: ar.CallID, Decision: protocol.DecisionApproved, InputDigest: ar.InputDigest}); err == nil {
		t.Fatal("an approval after the caller's request ended was accepted")
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("the tool ran %d times for a caller that had gone", n)
	}
}

// TestReleaseDoesNotWaitForCalls (issue 23: SIGTERM hung 60 s+ in
// ServerSession.Close behind a call awaiting approval): releasing a
// session returns at once with a call awaiting approval, answers its
// caller unavailable, and leaves the call pending and decidable — a stop
// writes nothing to the session.
func TestReleaseDoesNotWaitForCalls(t *testing.T) {
	f := newFixture(t)
	ns := newNodes(t, f.s, 1, nil)
	cs := ns.connect(t, nil, nil)
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()
	res := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{}})
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "error: " + err.Error()}}}
		}
		res <- r
	}()
	ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool {
		_, ok := m.(*protocol.ApprovalRequested)
		return ok
	}).(*protocol.ApprovalRequested)
	seq := f.s.LastSeq()
	released := make(chan struct{})
	go func() { ns.hs[0].Release(f.s); close(released) }()
	recv(t, released, "Release to return") // it hung here before
	r := recv(t, res, "the caller's answer")
	if !r.IsError || !strings.HasPrefix(text(t, r), "unavailable: ") {
		t.Fatalf("the caller got %q, want unavailable", text(t, r))
	}
	if got := f.s.LastSeq(); got != seq {
		for {
			ev, ok, _, _ := sub.TryNext()
			if !ok {
				break
			}
			t.Logf("event %d: %T %+v", ev.Seq, ev.Msg, ev.Msg)
		}
		t.Fatalf("releasing wrote %d events to the session", got-seq)
	}
	if n := f.s.PendingCalls(); n != 1 {
		t.Fatalf("%d pending calls after the release, want the one awaiting approval", n)
	}
	must(t, f.s.Approve(session.Client, &protocol.CapabilityApprove{CallID: ar.CallID, Decision: protocol.DecisionRejected}))
}

// TestReleaseDeliversCancelled (issue 23, "Delete is final"): a call that
// a Delete cancels reaches its MCP caller as cancelled before the MCP
// session closes — a Delete cancels the calls, then releases.
func TestReleaseDeliversCancelled(t *testing.T) {
	for range 5 { // it was lost in 5 of 6 trials
		f := newFixture(t)
		ns := newNodes(t, f.s, 1, nil)
		cs := ns.connect(t, &mcp.ClientOptions{}, nil)
		sub := f.s.Subscribe(f.s.LastSeq())
		res := make(chan *mcp.CallToolResult, 1)
		errc := make(chan error, 1)
		go func() {
			r, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{}})
			if err != nil {
				errc <- err
				return
			}
			res <- r
		}()
		ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool {
			_, ok := m.(*protocol.ApprovalRequested)
			return ok
		}).(*protocol.ApprovalRequested)
		sub.Close()
		must(t, f.s.Cancel(ar.CallID, "the session was deleted"))
		ns.hs[0].Release(f.s)
		select {
		case r := <-res:
			if !r.IsError || !strings.HasPrefix(text(t, r), "cancelled: ") {
				t.Fatalf("the caller got %q, want cancelled", text(t, r))
			}
		case err := <-errc:
			t.Fatalf("the caller got no result: %v", err)
		case <-time.After(waitLimit):
			t.Fatal("the caller got nothing")
		}
	}
}

// TestProgress (issue 20 item 3): a handler's progress reaches a caller
// that sent a progressToken, as notifications/progress on its request.
func TestProgress(t *testing.T) {
	s := session.New("progress", nil)
	must(t, s.RegisterAgent(agentCap("slow"), session.HandlerFunc(func(ctx context.Context, _ *session.Call) (json.RawMessage, error) {
		for i := 1; i <= 3; i++ {
			session.ReportProgress(ctx, session.Progress{Done: float64(i), Total: 3, Message: "step"})
		}
		return json.RawMessage(`"done"`), nil
	})))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			got := make(chan *mcp.ProgressNotificationParams, 8)
			cs := tr.connect(t, s, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				got <- r.Params
			}})
			p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
			p.SetProgressToken("tok-1")
			res, err := cs.CallTool(waitCtx(t), p)
			must(t, err)
			if text(t, res) != `"done"` {
				t.Fatalf("result %q", text(t, res))
			}
			for i := 1; i <= 3; i++ {
				n := recv(t, got, "a progress notification")
				if n.ProgressToken != "tok-1" || n.Progress != float64(i) || n.Total != 3 || n.Message != "step" {
					t.Fatalf("progress %d = %+v", i, n)
				}
			}
			// Without a token, none is sent.
			if _, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			select {
			case n := <-got:
				t.Fatalf("progress without a token: %+v", n)
			default:
			}
		})
	}
}

// TestClientProgress (issue 20 item 3): a client capability's
// capability_progress reaches the MCP caller that sent a progressToken.
func TestClientProgress(t *testing.T) {
	s := session.New("client-progress", nil)
	c := agentCap("peer.slow")
	c.Side, c.Origin = protocol.SideClient, protocol.Origin{Kind: protocol.OriginClient}
	must(t, s.Register(session.Client, c))
	sub := s.Subscribe(s.LastSeq())
	t.Cleanup(sub.Close)
	go func() { // the client: report, then answer
		for {
			ev, err := sub.Next(context.Background())
			if err != nil {
				return
			}
			if inv, ok := ev.Msg.(*protocol.CapabilityInvoked); ok {
				_ = s.Progress(session.Client, &protocol.CapabilityProgress{CallID: inv.CallID, Progress: 1, Total: 1, Message: "read"})
				_ = s.Result(session.Client, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`"done"`)})
			}
		}
	}()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			got := make(chan *mcp.ProgressNotificationParams, 8)
			cs := tr.connect(t, s, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				got <- r.Params
			}})
			p := &mcp.CallToolParams{Name: "peer.slow", Arguments: map[string]any{}}
			p.SetProgressToken("tok-2")
			res, err := cs.CallTool(waitCtx(t), p)
			must(t, err)
			if text(t, res) != `"done"` {
				t.Fatalf("result %q", text(t, res))
			}
			if n := recv(t, got, "a progress notification"); n.ProgressToken != "tok-2" || n.Progress != 1 || n.Total != 1 || n.Message != "read" {
				t.Fatalf("progress = %+v", n)
			}
		})
	}
}

// TestRestoredSessionHearsListChanged: an MCP session restored on another
// node hears tools/list_changed once it is connected there, whether or not
// the registry changed — its client may have missed changes while no node
// served it. The announcement used to be made before the restored session
// was connected, and reached nobody.
func TestRestoredSessionHearsListChanged(t *testing.T) {
	f := newFixture(t)
	ns := newNodes(t, f.s, 2, nil)
	changed := make(chan struct{}, 64)
	cs := ns.connect(t, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, nil)
	if _, err := cs.ListTools(waitCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	for len(changed) > 0 {
		<-changed
	}
	ns.handover(1)
	if _, err := cs.ListTools(waitCtx(t), nil); err != nil { // the request that restores it on node 1
		t.Fatal(err)
	}
	recv(t, changed, "tools/list_changed after the restore")
}

// TestRestoredVersionIsNegotiated: a restored MCP session goes on with the
// version an initialize asking for its id's would have negotiated — a
// forged id claiming 2026-07-28 or 9999-99-99 was served as that,
// fields of a revision initialize never grants included.
func TestRestoredVersionIsNegotiated(t *testing.T) {
	f := newFixture(t)
	ns := newNodes(t, f.s, 1, nil)
	for claim, want := range map[string]string{"2026-07-28": "2025-11-25", "9999-99-99": "2025-11-25", "2025-06-18": "2025-06-18"} {
		state, _ := json.Marshal(map[string]any{"s": f.s.ID(), "v": claim})
		id := "b1." + strings.Repeat("A", 26) + "." + base64.RawURLEncoding.EncodeToString(state)
		resp := post(t, ns.url, id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "resultType") {
			t.Errorf("an id claiming %s: %s %s, want it served as %s", claim, resp.Status, body, want)
		}
	}
}

// TestRestoredVersionIsNotTheHeaders: a restored MCP session goes on with
// the version in its id, never the restoring request's
// Mcp-Protocol-Version, and a request whose header names another version
// is handled as on a live session. A restore by a request claiming
// 2026-07-28 (itself refused, as on a live session) left the session
// answering 2025-06-18 requests with that revision's framing — an unknown
// tool as HTTP 400, resources/subscribe as 404 — instead of over SSE with
// HTTP 200.
func TestRestoredVersionIsNotTheHeaders(t *testing.T) {
	f := newFixture(t)
	ns := newNodes(t, f.s, 1, nil)
	state, _ := json.Marshal(map[string]any{"s": f.s.ID(), "v": "2025-06-18"})
	for name, sid := range map[string]string{
		"live":     ns.connect(t, nil, nil).ID(),
		"restored": "b1." + strings.Repeat("B", 26) + "." + base64.RawURLEncoding.EncodeToString(state),
	} {
		t.Run(name, func(t *testing.T) {
			// For the restored session, the request that restores it.
			resp := postMCP(t, ns.url, sid, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":-32022`) {
				t.Fatalf("tools/list claiming 2026-07-28: %s %s, want 400 and -32022 (unsupported protocol version)", resp.Status, body)
			}
			for _, c := range []struct{ body, want string }{
				{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, `"code":-32602`},
				{`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///x"}}`, `"error"`},
			} {
				resp := postMCP(t, ns.url, sid, "2025-06-18", c.body)
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(body), c.want) {
					t.Errorf("%s: %s %q %s, want 200 and an SSE event with %s", c.body, resp.Status, resp.Header.Get("Content-Type"), body, c.want)
				}
			}
		})
	}
}
