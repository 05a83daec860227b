package mcpbridge_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// elicitFixture is a session that takes MCP decisions, served by nodes
// that ask hosts to approve their calls.
func elicitFixture(t *testing.T) (*fixture, *nodes) {
	t.Helper()
	return elicitFixtureLogging(t, nil)
}

// elicitFixtureLogging is elicitFixture with the bridge's logs sent to
// logger.
func elicitFixtureLogging(t *testing.T, logger *slog.Logger) (*fixture, *nodes) {
	t.Helper()
	f := &fixture{s: session.New("el", &session.Options{MCPDecisions: true}), blocked: make(chan struct{}, 1), cancelled: make(chan struct{}, 1)}
	danger := agentCap("danger")
	danger.DisplayName = "Danger"
	danger.RequiresApproval = true
	must(t, f.s.RegisterAgent(danger, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		f.runs.Add(1)
		return json.RawMessage(`{"done":true}`), nil
	})))
	return f, newNodes(t, f.s, 1, &mcpbridge.ServerOptions{Elicitation: true, Logger: logger})
}

// logWatch is a slog.Handler that sends the messages containing match on
// lines, so a test can wait for a line the code logs; other records are
// dropped, and so none can fill lines before the one waited for.
type logWatch struct {
	match string
	lines chan string
}

func (*logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, w.match) {
		select {
		case w.lines <- r.Message:
		default: // more than the test waits for: it fails on the count
		}
	}
	return nil
}
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

// decided returns the approval_decided of the next decision.
func decided(t *testing.T, sub *session.Subscription) *protocol.ApprovalDecided {
	t.Helper()
	return waitEvent(t, sub, "approval_decided", func(m protocol.Message) bool {
		_, ok := m.(*protocol.ApprovalDecided)
		return ok
	}).(*protocol.ApprovalDecided)
}

// TestElicitedApproval (issue 20 item 2): a host that announces
// elicitation is asked to approve its own call; its user's answer decides
// it as {side: "mcp", name: the token's}, bound to the digest; a rejection's
// feedback reaches the model.
func TestElicitedApproval(t *testing.T) {
	cases := []struct {
		name     string
		answer   *mcp.ElicitResult
		wantText string
		runs     int32
		decision protocol.Decision
	}{
		{"approve", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, `{"done":true}`, 1, protocol.DecisionApproved},
		{"reject with feedback", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "reject", "feedback": "not that folder"}}, "rejected: the user (ada) rejected the call: not that folder", 0, protocol.DecisionRejected},
		{"decline", &mcp.ElicitResult{Action: "decline"}, "rejected: the user (ada) rejected the call", 0, protocol.DecisionRejected},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ns := elicitFixture(t)
			asked := make(chan *mcp.ElicitParams, 1)
			cs := ns.connect(t, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- r.Params
				return c.answer, nil
			}}, nil)
			sub := f.s.Subscribe(f.s.LastSeq())
			defer sub.Close()
			res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{"path": "/etc"}})
			must(t, err)
			if got := text(t, res); got != c.wantText {
				t.Fatalf("result %q, want %q", got, c.wantText)
			}
			p := recv(t, asked, "the elicitation")
			for _, want := range []string{"Danger (danger)", `{"path":"/etc"}`} {
				if !strings.Contains(p.Message, want) {
					t.Errorf("the question %q does not show %q", p.Message, want)
				}
			}
			d := decided(t, sub)
			if d.Decision != c.decision || d.Decider.Side != "mcp" || d.Decider.Name != "ada" || d.InputDigest == "" {
				t.Fatalf("decision %+v", d)
			}
			if n := f.runs.Load(); n != c.runs {
				t.Fatalf("ran %d times, want %d", n, c.runs)
			}
		})
	}
}

// A host without elicitation keeps today's wait: nothing is asked, and the
// client decides.
func TestElicitationNotAnnounced(t *testing.T) {
	f, ns := elicitFixture(t)
	cs := ns.connect(t, nil, nil)
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()
	res := make(chan string, 1)
	go func() {
		r, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{}})
		if err != nil {
			res <- err.Error()
			return
		}
		res <- text(t, r)
	}()
	ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool { _, ok := m.(*protocol.ApprovalRequested); return ok }).(*protocol.ApprovalRequested)
	must(t, f.s.Approve(session.Client, &protocol.CapabilityApprove{CallID: ar.CallID, Decision: protocol.DecisionApproved, InputDigest: ar.InputDigest}))
	if got := recv(t, res, "the result"); got != `{"done":true}` {
		t.Fatalf("result %q", got)
	}
	if d := decided(t, sub); d.Decider.Side != "client" {
		t.Fatalf("decider %+v", d.Decider)
	}
}

// A client's decision made while the host's user is still looking at the
// question wins; the host's answer is refused (the first decision stands)
// and the question is withdrawn from the host.
func TestElicitationRacingClient(t *testing.T) {
	f, ns := elicitFixture(t)
	asked := make(chan struct{}, 1)
	withdrawn := make(chan struct{}, 1)
	cs := ns.connect(t, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		<-ctx.Done() // the user has not answered yet
		withdrawn <- struct{}{}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	}}, nil)
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()
	res := make(chan string, 1)
	go func() {
		r, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{}})
		if err != nil {
			res <- err.Error()
			return
		}
		res <- text(t, r)
	}()
	ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool { _, ok := m.(*protocol.ApprovalRequested); return ok }).(*protocol.ApprovalRequested)
	recv(t, asked, "the elicitation")
	must(t, f.s.Approve(session.Client, &protocol.CapabilityApprove{CallID: ar.CallID, Decision: protocol.DecisionRejected, DecidedBy: "bob", Feedback: "no"}))
	if got := recv(t, res, "the result"); got != "rejected: the user (bob) rejected the call: no" {
		t.Fatalf("result %q", got)
	}
	recv(t, withdrawn, "the question to be withdrawn from the host")
	if d := decided(t, sub); d.Decider.Side != "client" {
		t.Fatalf("decider %+v", d.Decider)
	}
	if n := f.runs.Load(); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// Without MCPDecisions in the session, an MCP-side decision is refused,
// whatever the export does.
func TestMCPDecisionsOff(t *testing.T) {
	f := newFixture(t)
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()
	go f.s.Invoke(waitCtx(t), protocol.AudienceLLM, "danger", []byte(`{}`))
	ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool { _, ok := m.(*protocol.ApprovalRequested); return ok }).(*protocol.ApprovalRequested)
	err := f.s.Approve(session.Peer{Side: session.SideMCP, Name: "ada"}, &protocol.CapabilityApprove{CallID: ar.CallID, Decision: protocol.DecisionApproved, InputDigest: ar.InputDigest})
	if err == nil {
		t.Fatal("an MCP-side approval was accepted with MCPDecisions off")
	}
	must(t, f.s.Cancel(ar.CallID, "done"))
}

// A request re-issued while the host's user looks at it (the capability
// was re-registered with another definition) is withdrawn from the host
// and asked again, about the new definition; the answer to the new
// question decides the call.
func TestElicitationReissued(t *testing.T) {
	f, ns := elicitFixture(t)
	asked := make(chan *mcp.ElicitParams, 2)
	withdrawn := make(chan struct{}, 1)
	var n atomic.Int32 // the host's handlers run concurrently
	cs := ns.connect(t, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		first := n.Add(1) == 1
		asked <- r.Params
		if first { // the first question stays open until the server withdraws it
			<-ctx.Done()
			withdrawn <- struct{}{}
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	}}, nil)
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()
	res := make(chan string, 1)
	go func() {
		r, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{"path": "/tmp"}})
		if err != nil {
			res <- err.Error()
			return
		}
		res <- text(t, r)
	}()
	first := recv(t, asked, "the first question")
	danger := agentCap("danger")
	danger.DisplayName = "Danger"
	danger.Description = "Deletes everything under path."
	danger.RequiresApproval = true
	must(t, f.s.RegisterAgent(danger, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		f.runs.Add(1)
		return json.RawMessage(`{"done":"again"}`), nil
	})))
	recv(t, withdrawn, "the first question withdrawn")
	second := recv(t, asked, "the second question")
	if strings.Contains(first.Message, "Deletes everything") || !strings.Contains(second.Message, "Deletes everything under path.") {
		t.Fatalf("questions:\n%s\n---\n%s", first.Message, second.Message)
	}
	if got := recv(t, res, "the result"); got != `{"done":"again"}` {
		t.Fatalf("result %q", got)
	}
	if d := decided(t, sub); d.Decider.Side != "mcp" || d.Decision != protocol.DecisionApproved {
		t.Fatalf("decision %+v", d)
	}
}

// TestElicitationAskedAgain: an answer that is no decision — content
// outside the form (a decision of "maybe"), or accepted with no content —
// is asked again, saying why; a host that never answers with a decision is
// asked three times, and the call then waits for another decider.
func TestElicitationAskedAgain(t *testing.T) {
	gaveUp := &logWatch{match: "answered without a decision", lines: make(chan string, 1)}
	f, ns := elicitFixtureLogging(t, slog.New(gaveUp))
	asked := make(chan *mcp.ElicitParams, 4)
	var n atomic.Int32
	cs := ns.connect(t, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		// Counted before the test hears of it: the count is read once the
		// test has had its questions.
		k := n.Add(1)
		asked <- r.Params
		switch k {
		case 1:
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "maybe"}}, nil
		case 2:
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
		default:
			return &mcp.ElicitResult{Action: "accept"}, nil
		}
	}}, nil)
	sub := f.s.Subscribe(f.s.LastSeq())
	defer sub.Close()
	res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{}})
	must(t, err)
	if got := text(t, res); got != `{"done":true}` {
		t.Fatalf("result %q", got)
	}
	if first, second := recv(t, asked, "the question"), recv(t, asked, "the question again"); strings.Contains(first.Message, "could not be read") ||
		!strings.Contains(second.Message, "could not be read as a decision (it does not match the form)") {
		t.Fatalf("questions:\n%s\n---\n%s", first.Message, second.Message)
	}
	if d := decided(t, sub); d.Decider.Side != "mcp" || d.Decision != protocol.DecisionApproved {
		t.Fatalf("decision %+v", d)
	}

	// Never a decision: three questions, then the client decides.
	done := make(chan string, 1)
	go func() {
		r, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{"again": true}})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- text(t, r)
	}()
	ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool { _, ok := m.(*protocol.ApprovalRequested); return ok }).(*protocol.ApprovalRequested)
	for i := 0; i < 3; i++ {
		if p := recv(t, asked, "a question"); i > 0 && !strings.Contains(p.Message, "(no decision given)") {
			t.Fatalf("question %d: %s", i+1, p.Message)
		}
	}
	// The third answer is logged and the call waits: a client's decision
	// now decides it. The log line is written once the bridge has stopped
	// asking, so a fourth question would have been counted by then.
	if line := recv(t, gaveUp.lines, "the log of the third answer"); !strings.Contains(line, "3 times") {
		t.Fatalf("logged %q", line)
	}
	must(t, f.s.Approve(session.Client, &protocol.CapabilityApprove{CallID: ar.CallID, Decision: protocol.DecisionApproved, InputDigest: ar.InputDigest}))
	if got := recv(t, done, "the result"); got != `{"done":true}` {
		t.Fatalf("result %q", got)
	}
	if got := n.Load(); got != 5 {
		t.Fatalf("the host was asked %d times in all, want 2 + 3", got)
	}
}

// TestElicitationWithdrawnWhenDecided: a call the client approves while
// the host's user still has its question is withdrawn from the host at
// once — not when the tool, which runs on, ends — and the host is told
// why (notifications/cancelled's reason), where it was told "context
// canceled" once the call was over (MCP probe).
func TestElicitationWithdrawnWhenDecided(t *testing.T) {
	s := session.New("el", &session.Options{MCPDecisions: true})
	release := make(chan struct{})
	slow := agentCap("slow")
	slow.RequiresApproval = true
	must(t, s.RegisterAgent(slow, session.HandlerFunc(func(ctx context.Context, _ *session.Call) (json.RawMessage, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`{"done":true}`), nil
	})))
	ns := newNodes(t, s, 1, &mcpbridge.ServerOptions{Elicitation: true})
	asked, withdrawn, reasons := make(chan struct{}, 1), make(chan struct{}, 1), make(chan string, 4)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- struct{}{}
			<-ctx.Done() // the user has not answered
			withdrawn <- struct{}{}
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}})
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CancelledParams); ok && method == "notifications/cancelled" {
				reasons <- p.Reason
			}
			return next(ctx, method, req)
		}
	})
	cs, err := c.Connect(waitCtx(t), &mcp.StreamableClientTransport{Endpoint: ns.url}, nil)
	must(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	res := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		res <- err
	}()
	ar := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool { _, ok := m.(*protocol.ApprovalRequested); return ok }).(*protocol.ApprovalRequested)
	recv(t, asked, "the elicitation")
	must(t, s.Approve(session.Client, &protocol.CapabilityApprove{CallID: ar.CallID, Decision: protocol.DecisionApproved, DecidedBy: "bob"}))
	recv(t, withdrawn, "the question withdrawn while the call runs")
	if got := recv(t, reasons, "the withdrawal's reason"); got != "the call was approved by the client (bob)" {
		t.Fatalf("the host was told %q", got)
	}
	close(release)
	if err := recv(t, res, "the call's result"); err != nil {
		t.Fatal(err)
	}
}
