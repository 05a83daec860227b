package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestInvokeRefused: a call refused at lookup, audience or input validation
// never starts: no event, no pending call, the handler never runs.
func TestInvokeRefused(t *testing.T) {
	const nested = `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}},"additionalProperties":false}`
	setup := func(t *testing.T) (*session.Session, *atomic.Int32) {
		s := session.New("test", nil)
		ran := new(atomic.Int32)
		h := session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
			ran.Add(1)
			return json.RawMessage(`{}`), nil
		})
		agent := func(name string, a []protocol.Audience, schema string) {
			c := agentCap(name)
			c.Audience = a
			c.RequiresApproval = true // refused calls must not even ask
			if schema != "" {
				c.InputSchema = json.RawMessage(schema)
			}
			if err := s.RegisterAgent(c, h); err != nil {
				t.Fatal(err)
			}
		}
		agent("a.llm", []protocol.Audience{protocol.AudienceLLM}, "")
		agent("a.user", []protocol.Audience{protocol.AudienceUser}, "")
		agent("a.runtime", []protocol.Audience{protocol.AudienceRuntime}, "")
		agent("a.default", nil, "") // origin agent: not user-invokable by default
		agent("a.nobody", []protocol.Audience{}, "")
		agent("a.nested", nil, nested)
		c := clientCap("host.audit")
		c.Audience = []protocol.Audience{protocol.AudienceRuntime}
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
		return s, ran
	}
	tests := []struct {
		name    string
		invoker protocol.Audience
		cap     string
		input   string
		code    protocol.Code
		says    []string
	}{
		{"unknown name", protocol.AudienceLLM, "a.nope", `{"text":"hi"}`, protocol.CodeNotFound, []string{`"a.nope"`}},
		{"llm invokes runtime-only", protocol.AudienceLLM, "a.runtime", `{"text":"hi"}`, protocol.CodeForbidden, []string{"not available to the llm"}},
		{"user invokes runtime-only", protocol.AudienceUser, "a.runtime", `{"text":"hi"}`, protocol.CodeForbidden, []string{"not available to the user"}},
		{"llm invokes a runtime-only client capability", protocol.AudienceLLM, "host.audit", `{"text":"hi"}`, protocol.CodeForbidden, nil},
		{"user invokes llm-only", protocol.AudienceUser, "a.llm", `{"text":"hi"}`, protocol.CodeForbidden, nil},
		{"runtime invokes llm-only", protocol.AudienceRuntime, "a.llm", `{"text":"hi"}`, protocol.CodeForbidden, nil},
		{"llm invokes user-only", protocol.AudienceLLM, "a.user", `{"text":"hi"}`, protocol.CodeForbidden, nil},
		{"user invokes a default agent capability", protocol.AudienceUser, "a.default", `{"text":"hi"}`, protocol.CodeForbidden, nil},
		{"llm invokes an empty audience", protocol.AudienceLLM, "a.nobody", `{"text":"hi"}`, protocol.CodeForbidden, nil},
		{"audience checked before input", protocol.AudienceUser, "a.llm", `not json`, protocol.CodeForbidden, nil},
		{"unknown invoker", "admin", "a.llm", `{"text":"hi"}`, protocol.CodeInvalidRequest, []string{`"admin"`}},
		{"wrong type", protocol.AudienceLLM, "a.llm", `{"text":5}`, protocol.CodeInvalidInput, []string{`at "/text"`, "want string"}},
		{"too long", protocol.AudienceLLM, "a.llm", `{"text":"` + strings.Repeat("x", 21) + `"}`, protocol.CodeInvalidInput, []string{`at "/text"`}},
		{"missing property", protocol.AudienceLLM, "a.llm", `{}`, protocol.CodeInvalidInput, []string{`at "/"`, "text"}},
		{"extra property", protocol.AudienceLLM, "a.llm", `{"text":"hi","force":true}`, protocol.CodeInvalidInput, []string{`at "/"`, "force"}},
		{"not an object", protocol.AudienceLLM, "a.llm", `["hi"]`, protocol.CodeInvalidInput, []string{`at "/"`}},
		{"null", protocol.AudienceLLM, "a.llm", `null`, protocol.CodeInvalidInput, []string{`at "/"`}},
		{"not JSON", protocol.AudienceLLM, "a.llm", `{"text":`, protocol.CodeInvalidInput, []string{"not valid JSON"}},
		{"absent input is {}", protocol.AudienceLLM, "a.llm", ``, protocol.CodeInvalidInput, []string{`at "/"`, "text"}},
		{"nested pointers", protocol.AudienceLLM, "a.nested", `{"items":[{"name":"a"},{"name":3},{}]}`, protocol.CodeInvalidInput,
			[]string{`at "/items/1/name": `, `at "/items/2": `}},
		{"escaped pointer", protocol.AudienceLLM, "a.nested", `{"a/b~c":1}`, protocol.CodeInvalidInput, []string{"a/b~c"}},
	}
	for _, tt := range tests {
		for _, via := range []string{"Invoke", "Start"} {
			t.Run(tt.name+"/"+via, func(t *testing.T) {
				s, ran := setup(t)
				before, seq := state(t, s), s.LastSeq()
				var out protocol.Outcome
				if via == "Invoke" {
					out = s.Invoke(waitCtx(t), tt.invoker, tt.cap, json.RawMessage(tt.input))
				} else {
					id, err := s.Start(tt.invoker, tt.cap, json.RawMessage(tt.input))
					if id != "" || err == nil {
						t.Fatalf("Start = %q, %v; want no call and an error", id, err)
					}
					out = protocol.Outcome{Err: err}
				}
				wantCode(t, out, tt.code)
				for _, w := range tt.says {
					if !strings.Contains(out.Err.Message, w) {
						t.Errorf("message %q does not say %q", out.Err.Message, w)
					}
				}
				if s.LastSeq() != seq || state(t, s) != before {
					t.Errorf("a refused call changed the session: %s", jsonOf(t, eventsAfter(t, s, seq)))
				}
				if n := ran.Load(); n != 0 {
					t.Errorf("the handler ran %d times", n)
				}
			})
		}
	}
}

// TestInvokePassesTheCall: the handler gets the call's id, name, validated
// input and invoker, the caller's context values and a deadline; events
// report the same call.
func TestInvokePassesTheCall(t *testing.T) {
	type key struct{}
	s := session.New("test", nil)
	c := agentCap("tool")
	c.CallTimeoutMs = ms(30_000)
	c.Audience = []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}
	got := make(chan session.Call, 1)
	var deadline time.Time
	var hasDeadline bool
	var value any
	if err := s.RegisterAgent(c, session.HandlerFunc(func(ctx context.Context, call *session.Call) (json.RawMessage, error) {
		got <- *call
		deadline, hasDeadline = ctx.Deadline()
		value = ctx.Value(key{})
		return json.RawMessage(`{"ok":true}`), nil
	})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx := context.WithValue(waitCtx(t), key{}, "from the caller")
	out := s.Invoke(ctx, protocol.AudienceUser, "tool", json.RawMessage(` {"text":"hi"} `))
	wantValue(t, out, `{"ok":true}`)
	call := recv(t, got, "the handler's call")
	if call.Name != "tool" || call.Invoker != protocol.AudienceUser || !jsonEqual(call.Input, textInput) || call.ID == "" {
		t.Errorf("handler got %+v", call)
	}
	if value != "from the caller" {
		t.Errorf("ctx.Value = %v, want the caller's value", value)
	}
	if !hasDeadline || deadline.Before(start) || deadline.After(start.Add(31*time.Second)) {
		t.Errorf("ctx.Deadline() = %v, %v; want within callTimeoutMs (30 s) of %v", deadline, hasDeadline, start)
	}
	evs := allEvents(t, s)
	inv := only[*protocol.CapabilityInvoked](evs)
	if len(inv) != 1 || inv[0].CallID != call.ID || inv[0].Name != "tool" || inv[0].InvokedBy != "agent" || !jsonEqual(inv[0].Input, textInput) {
		t.Errorf("capability_invoked events: %s", jsonOf(t, inv))
	}
	if o := theOutcome(t, s, out); o.CallID != call.ID || o.Name != "tool" {
		t.Errorf("capability_outcome %s is not the call %s", jsonOf(t, o), call.ID)
	}
	if tr := trail(evs, call.ID); !slices.Equal(tr, []protocol.Type{protocol.TypeCapabilityInvoked, protocol.TypeCapabilityOutcome}) {
		t.Errorf("call events %v", tr)
	}
	t.Run("the caller's deadline is earlier", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		callerDeadline, _ := ctx.Deadline()
		c.CallTimeoutMs = ms(10 * 3600_000)
		if err := s.RegisterAgent(c, session.HandlerFunc(func(ctx context.Context, _ *session.Call) (json.RawMessage, error) {
			deadline, hasDeadline = ctx.Deadline()
			return nil, nil
		})); err != nil {
			t.Fatal(err)
		}
		s.Invoke(ctx, protocol.AudienceLLM, "tool", textInput)
		if !hasDeadline || !deadline.Equal(callerDeadline) {
			t.Errorf("ctx.Deadline() = %v, want the caller's %v", deadline, callerDeadline)
		}
	})
}

// TestInputIsTheCallers: the bridge keeps its own copy of a call's input,
// so that a caller reusing its buffer after Start or Invoke returns cannot
// change what the handler runs on (input that passed validation) or what
// the event log reports.
func TestInputIsTheCallers(t *testing.T) {
	s := session.New("test", nil)
	g := newGate(false)
	if err := s.RegisterAgent(agentCap("tool"), g); err != nil {
		t.Fatal(err)
	}
	buf := []byte(`{"text":"hi"}`)
	id, perr := s.Start(protocol.AudienceLLM, "tool", buf)
	if perr != nil {
		t.Fatal(perr)
	}
	copy(buf, `{"text":99}  `) // the caller reuses its buffer; invalid input now
	call := recv(t, g.started, "the handler")
	close(g.release)
	sub := s.Subscribe(0)
	defer sub.Close()
	waitFor(t, sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
	if !jsonEqual(call.Input, textInput) {
		t.Errorf("the handler ran on %s, not the validated input %s", call.Input, textInput)
	}
	inv := only[*protocol.CapabilityInvoked](allEvents(t, s))
	if len(inv) != 1 || !jsonEqual(inv[0].Input, textInput) {
		t.Errorf("capability_invoked reports %s, want %s", jsonOf(t, inv), textInput)
	}
}

// TestApprovalGatesDispatch: a call that requires approval publishes
// approval_requested and nothing else — no capability_invoked, no handler
// call, no client dispatch — until it is approved (the ADK-go #876 bug).
func TestApprovalGatesDispatch(t *testing.T) {
	for _, side := range []string{"agent", "client", "app"} {
		t.Run(side, func(t *testing.T) {
			s := session.New("test", nil)
			var approved atomic.Bool
			var ran, ranEarly atomic.Int32
			var owner session.Peer
			switch side {
			case "agent":
				c := agentCap("fs.delete")
				c.RequiresApproval = true
				owner = session.Runtime
				if err := s.RegisterAgent(c, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
					ran.Add(1)
					if !approved.Load() {
						ranEarly.Add(1)
					}
					return json.RawMessage(`{"deleted":true}`), nil
				})); err != nil {
					t.Fatal(err)
				}
			case "client":
				c := clientCap("fs.delete")
				c.RequiresApproval = true
				owner = session.Client
				if err := s.Register(owner, c); err != nil {
					t.Fatal(err)
				}
			case "app":
				c := appCap("files", "fs.delete")
				c.RequiresApproval = true
				owner = session.App("files")
				if err := s.Register(owner, c); err != nil {
					t.Fatal(err)
				}
			}
			sub := watch(t, s)
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()

			req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			if req.Name != "fs.delete" || req.Invoker != protocol.AudienceLLM || !jsonEqual(req.Input, textInput) || req.CallID == "" {
				t.Fatalf("approval_requested = %s", jsonOf(t, req))
			}
			// Awaiting approval: the call is pending, and nothing was dispatched.
			snap := s.Snapshot()
			if len(snap.PendingCalls) != 1 || snap.PendingCalls[0].CallID != req.CallID || snap.PendingCalls[0].State != protocol.CallAwaitingApproval {
				t.Fatalf("pending calls while awaiting approval: %s", jsonOf(t, snap.PendingCalls))
			}
			if tr := trail(allEvents(t, s), req.CallID); !slices.Equal(tr, []protocol.Type{protocol.TypeApprovalRequested}) {
				t.Fatalf("events of the call while awaiting approval: %v", tr)
			}
			err := s.Result(owner, &protocol.CapabilityResult{CallID: req.CallID, Result: json.RawMessage(`{"deleted":true}`)})
			if side == "agent" {
				wantErrCode(t, err, protocol.CodeForbidden)
			} else {
				wantErrCode(t, err, protocol.CodeConflict) // never dispatched: nothing to answer
			}
			if n := ran.Load(); n != 0 {
				t.Fatalf("the handler ran %d times before approval", n)
			}

			approved.Store(true)
			if err := s.Approve(session.Client, approvalOf(req, protocol.DecisionApproved, "ada")); err != nil {
				t.Fatalf("Approve: %v", err)
			}
			if side != "agent" {
				inv, _ := waitFor(t, sub, func(m *protocol.CapabilityInvoked) bool { return m.CallID == req.CallID })
				if err := s.Result(owner, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{"deleted":true}`)}); err != nil {
					t.Fatalf("Result: %v", err)
				}
			}
			out := recv(t, done, "the approved call")
			wantValue(t, out, `{"deleted":true}`)
			if ran.Load() > 1 || ranEarly.Load() != 0 {
				t.Errorf("the handler ran %d times, %d of them before approval", ran.Load(), ranEarly.Load())
			}
			if side == "agent" && ran.Load() != 1 {
				t.Errorf("the handler ran %d times after approval, want 1", ran.Load())
			}
			theOutcome(t, s, out)
			want := []protocol.Type{protocol.TypeApprovalRequested, protocol.TypeApprovalDecided, protocol.TypeCapabilityInvoked, protocol.TypeCapabilityOutcome}
			if tr := trail(allEvents(t, s), req.CallID); !slices.Equal(tr, want) {
				t.Errorf("call events %v, want %v", tr, want)
			}
		})
	}
}

// approvalSession returns a session with an agent-side capability that
// requires approval and counts its runs, and a subscription.
func approvalSession(t *testing.T, opts *session.Options) (*session.Session, *session.Subscription, *atomic.Int32) {
	t.Helper()
	s := session.New("test", opts)
	c := agentCap("fs.delete")
	c.RequiresApproval = true
	ran := new(atomic.Int32)
	if err := s.RegisterAgent(c, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		ran.Add(1)
		return json.RawMessage(`{"deleted":true}`), nil
	})); err != nil {
		t.Fatal(err)
	}
	return s, watch(t, s), ran
}

// neverDispatched checks that a call ended without capability_invoked and
// that the approval-gated handler never ran.
func neverDispatched(t *testing.T, s *session.Session, id string, ran *atomic.Int32, out protocol.Outcome) {
	t.Helper()
	theOutcome(t, s, out)
	// Requested, perhaps decided (a rejection), never invoked, ended once.
	tr := trail(allEvents(t, s), id)
	if len(tr) < 2 || tr[0] != protocol.TypeApprovalRequested || tr[len(tr)-1] != protocol.TypeCapabilityOutcome ||
		slices.Contains(tr, protocol.TypeCapabilityInvoked) || slices.Index(tr, protocol.TypeCapabilityOutcome) != len(tr)-1 {
		t.Errorf("call events %v, want approval_requested, no capability_invoked, one capability_outcome last", tr)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
}

// TestApprovalEnds: every way a call can end while it waits for approval.
func TestApprovalEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, s *session.Session, id string, cancelCaller context.CancelFunc)
		code protocol.Code
		says []string
	}{
		{"rejected with feedback", func(t *testing.T, s *session.Session, id string, _ context.CancelFunc) {
			err := s.Approve(session.Client, &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionRejected,
				Feedback: "not that folder", DecidedBy: "ada"})
			if err != nil {
				t.Fatal(err)
			}
		}, protocol.CodeRejected, []string{"ada", "rejected", "not that folder"}},
		{"rejected by the runtime", func(t *testing.T, s *session.Session, id string, _ context.CancelFunc) {
			if err := s.Approve(session.Runtime, &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionRejected, DecidedBy: "policy"}); err != nil {
				t.Fatal(err)
			}
		}, protocol.CodeRejected, []string{"policy"}},
		{"cancelled", func(t *testing.T, s *session.Session, id string, _ context.CancelFunc) {
			if err := s.Cancel(id, "user closed the tab"); err != nil {
				t.Fatal(err)
			}
		}, protocol.CodeCancelled, []string{"user closed the tab"}},
		{"caller gives up", func(t *testing.T, s *session.Session, id string, cancel context.CancelFunc) {
			cancel()
		}, protocol.CodeCancelled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, sub, ran := approvalSession(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "fs.delete", textInput) }()
			req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			tt.end(t, s, req.CallID, cancel)
			out := recv(t, done, "the call's outcome")
			wantCode(t, out, tt.code)
			for _, w := range tt.says {
				if !strings.Contains(out.Err.Message, w) {
					t.Errorf("message %q does not carry %q", out.Err.Message, w)
				}
			}
			neverDispatched(t, s, req.CallID, ran, out)
			err := s.Approve(session.Client, approvalOf(req, protocol.DecisionApproved, "bob"))
			wantErrCode(t, err, protocol.CodeConflict) // too late: the call is over
			if len(s.Snapshot().PendingCalls) != 0 {
				t.Errorf("the call is still pending")
			}
		})
	}
}

// TestApprove: the first decision wins; approvals come only from the client
// (or the runtime) for a pending call that requires one.
func TestApprove(t *testing.T) {
	approve := func(s *session.Session, id string) *protocol.CapabilityApprove { return approveOf(s, id, "ada") }
	reject := func(id string) *protocol.CapabilityApprove {
		return &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionRejected, DecidedBy: "bob", Feedback: "no"}
	}
	tests := []struct {
		name   string
		decide func(s *session.Session, id string) error // the decision under test
		code   protocol.Code                             // its error code, "" for none
		after  protocol.Code                             // "" when the call then is approved and runs, else its outcome code
	}{
		{name: "approve", decide: func(s *session.Session, id string) error { return s.Approve(session.Client, approve(s, id)) }},
		{name: "runtime approves", decide: func(s *session.Session, id string) error { return s.Approve(session.Runtime, approve(s, id)) },
			code: protocol.CodeForbidden, after: protocol.CodeCancelled},
		{name: "environment approves", decide: func(s *session.Session, id string) error { return s.Approve(session.Environment, approve(s, id)) },
			code: protocol.CodeForbidden, after: protocol.CodeCancelled},
		{name: "operator approves", decide: func(s *session.Session, id string) error { return s.Approve(session.Operator("ops"), approve(s, id)) }},
		{name: "approve without the digest (the seed's shape)", decide: func(s *session.Session, id string) error {
			return s.Approve(session.Client, &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionApproved, DecidedBy: "ada"})
		}},
		{name: "approve with another digest", decide: func(s *session.Session, id string) error {
			m := approve(s, id)
			m.InputDigest = "sha256:" + strings.Repeat("0", 64)
			return s.Approve(session.Client, m)
		}, code: protocol.CodeStaleApproval, after: protocol.CodeCancelled},
		{name: "reject without the digest", decide: func(s *session.Session, id string) error {
			return s.Approve(session.Client, &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionRejected, DecidedBy: "ada"})
		}, after: protocol.CodeRejected},
		{name: "second decision rejects",
			decide: func(s *session.Session, id string) error {
				if err := s.Approve(session.Client, approve(s, id)); err != nil {
					return err
				}
				return s.Approve(session.Client, reject(id))
			}, code: protocol.CodeConflict},
		{name: "second decision approves",
			decide: func(s *session.Session, id string) error {
				if err := s.Approve(session.Client, reject(id)); err != nil {
					return err
				}
				return s.Approve(session.Client, approve(s, id))
			}, code: protocol.CodeConflict, after: protocol.CodeRejected},
		{name: "app approves", decide: func(s *session.Session, id string) error { return s.Approve(session.App("files"), approve(s, id)) },
			code: protocol.CodeForbidden, after: protocol.CodeCancelled},
		{name: "unknown decision", decide: func(s *session.Session, id string) error {
			return s.Approve(session.Client, &protocol.CapabilityApprove{CallID: id, Decision: "maybe", DecidedBy: "ada"})
		}, code: protocol.CodeInvalidRequest, after: protocol.CodeCancelled},
		{name: "unknown call", decide: func(s *session.Session, id string) error { return s.Approve(session.Client, approve(s, id+"x")) },
			code: protocol.CodeNotFound, after: protocol.CodeCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, sub, ran := approvalSession(t, nil)
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()
			req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			err := tt.decide(s, req.CallID)
			if tt.code == "" && err != nil {
				t.Fatalf("decision: %v", err)
			}
			if tt.code != "" {
				wantErrCode(t, err, tt.code)
			}
			if tt.after == protocol.CodeCancelled { // the refused decision left the call waiting
				snap := s.Snapshot()
				if len(snap.PendingCalls) != 1 || snap.PendingCalls[0].State != protocol.CallAwaitingApproval {
					t.Fatalf("after a refused decision the call is %s", jsonOf(t, snap.PendingCalls))
				}
				if err := s.Cancel(req.CallID, ""); err != nil {
					t.Fatal(err)
				}
			}
			out := recv(t, done, "the call's outcome")
			if tt.after == "" {
				wantValue(t, out, `{"deleted":true}`)
				theOutcome(t, s, out)
			} else {
				wantCode(t, out, tt.after)
				neverDispatched(t, s, req.CallID, ran, out)
			}
		})
	}
	t.Run("a call that needs none", func(t *testing.T) {
		s := session.New("test", nil)
		g := newGate(false)
		if err := s.RegisterAgent(agentCap("tool"), g); err != nil {
			t.Fatal(err)
		}
		id, perr := s.Start(protocol.AudienceLLM, "tool", textInput)
		if perr != nil {
			t.Fatal(perr)
		}
		recv(t, g.started, "the handler")
		wantErrCode(t, s.Approve(session.Client, approve(s, id)), protocol.CodeConflict)
		close(g.release)
	})
	t.Run("concurrent decisions", func(t *testing.T) {
		s, sub, _ := approvalSession(t, nil)
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()
		req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
		var wg sync.WaitGroup
		var accepted atomic.Int32
		var winner atomic.Value
		for i := range 8 {
			wg.Go(func() {
				m := approve(s, req.CallID)
				if i%2 == 1 {
					m = reject(req.CallID)
				}
				err := s.Approve(session.Client, m)
				if err == nil {
					accepted.Add(1)
					winner.Store(m.Decision)
					return
				}
				var c protocol.Coder
				if !errors.As(err, &c) || c.ErrorCode() != protocol.CodeConflict {
					t.Errorf("a losing decision got %v, want conflict", err)
				}
			})
		}
		wg.Wait()
		if accepted.Load() != 1 {
			t.Fatalf("%d decisions were accepted, want exactly 1", accepted.Load())
		}
		out := recv(t, done, "the call's outcome")
		if winner.Load() == protocol.DecisionApproved {
			wantValue(t, out, `{"deleted":true}`)
		} else {
			wantCode(t, out, protocol.CodeRejected)
		}
		theOutcome(t, s, out)
	})
	t.Run("late decision is logged", func(t *testing.T) {
		s, rec := recordingSession(session.Options{})
		c := agentCap("fs.delete")
		c.RequiresApproval = true
		if err := s.RegisterAgent(c, echo); err != nil {
			t.Fatal(err)
		}
		sub := watch(t, s)
		id, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
		if perr != nil {
			t.Fatal(perr)
		}
		waitFor[*protocol.ApprovalRequested](t, sub, nil)
		if err := s.Cancel(id, ""); err != nil {
			t.Fatal(err)
		}
		wantErrCode(t, s.Approve(session.Client, approve(s, id)), protocol.CodeConflict)
		if _, ok := rec.find("approval dropped", map[string]string{"call": id}); !ok {
			t.Errorf("a late approval was not logged; logs:\n%s", rec)
		}
	})
}

// TestRenderInvoked: a render capability's capability_invoked is followed
// at once by render_invoked with the same call id and the input as props.
func TestRenderInvoked(t *testing.T) {
	spec := &protocol.RenderSpec{
		Source:  protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: "https://cdn.example/card.js", TagName: "ui-card"},
		Targets: []protocol.RenderTarget{protocol.TargetChat, protocol.TargetPreview},
	}
	tests := []struct {
		name   string
		render bool
		side   protocol.Side
		fire   bool
	}{
		{"agent render", true, protocol.SideAgent, false},
		{"client render", true, protocol.SideClient, false},
		{"client render fire and forget", true, protocol.SideClient, true},
		{"agent not render", false, protocol.SideAgent, false},
		{"client not render", false, protocol.SideClient, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			var c protocol.Capability
			if tt.side == protocol.SideAgent {
				c = agentCap("ui.card")
			} else {
				c = clientCap("ui.card")
			}
			c.FireAndForget = tt.fire
			if tt.render {
				c.Render = spec
				c.Kind = protocol.KindRender
			}
			var err error
			if tt.side == protocol.SideAgent {
				err = s.RegisterAgent(c, echo)
			} else {
				err = s.Register(session.Client, c)
				if !tt.fire {
					answer(t, s, session.Client, "ui.card", func(*protocol.CapabilityInvoked) json.RawMessage { return json.RawMessage(`{"shown":true}`) })
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			out := s.Invoke(waitCtx(t), protocol.AudienceLLM, "ui.card", textInput)
			if !out.IsOK() {
				t.Fatalf("invoke: %s", out.Err)
			}
			o := theOutcome(t, s, out)
			evs := allEvents(t, s)
			renders := only[*protocol.RenderInvoked](evs)
			if !tt.render {
				if len(renders) != 0 {
					t.Fatalf("render_invoked for a capability without render: %s", jsonOf(t, renders))
				}
				return
			}
			want := []protocol.Type{protocol.TypeCapabilityInvoked, protocol.TypeRenderInvoked, protocol.TypeCapabilityOutcome}
			if tr := trail(evs, o.CallID); !slices.Equal(tr, want) {
				t.Fatalf("call events %v, want %v", tr, want)
			}
			var invSeq, renderSeq uint64
			for _, ev := range evs {
				switch ev.Msg.(type) {
				case *protocol.CapabilityInvoked:
					invSeq = ev.Seq
				case *protocol.RenderInvoked:
					renderSeq = ev.Seq
				}
			}
			r := renders[0]
			if renderSeq != invSeq+1 || r.CallID != o.CallID || r.CapabilityName != "ui.card" || !jsonEqual(r.Props, textInput) {
				t.Fatalf("render_invoked %s at seq %d, capability_invoked at %d", jsonOf(t, r), renderSeq, invSeq)
			}
		})
	}
}

// TestPeerResults: a client- or app-side call is dispatched as an event and
// ends with the owning peer's capability_result, read as the spec says.
func TestPeerResults(t *testing.T) {
	const outSchema = `{"type":"object","properties":{"shown":{"type":"boolean"}},"required":["shown"]}`
	tests := []struct {
		name      string
		outSchema string
		result    string
		value     string        // the outcome's value, when code is ""
		code      protocol.Code // the outcome's error code
		message   string
	}{
		{name: "value", result: `{"shown":true}`, value: `{"shown":true}`},
		{name: "null", result: `null`, value: `null`},
		{name: "string", result: `"done"`, value: `"done"`},
		{name: "error envelope", result: `{"error":"the tab is gone"}`, code: protocol.CodeToolError, message: "the tab is gone"},
		{name: "error envelope with a code", result: `{"error":"quota exhausted","code":"rate_limited"}`, code: "rate_limited", message: "quota exhausted"},
		{name: "error envelope with a dotted code", result: `{"error":"no","code":"platform.denied"}`, code: "platform.denied", message: "no"},
		{name: "error envelope with a bad code", result: `{"error":"no","code":"Rate Limited!"}`, code: protocol.CodeToolError, message: "no"},
		{name: "error that is not a string", result: `{"error":5}`, value: `{"error":5}`},
		{name: "output schema met", outSchema: outSchema, result: `{"shown":false}`, value: `{"shown":false}`},
		{name: "output schema broken", outSchema: outSchema, result: `{"shown":"yes"}`, code: protocol.CodeInvalidOutput, message: `at "/shown"`},
		{name: "error envelope skips the output schema", outSchema: outSchema, result: `{"error":"x","code":"busy"}`, code: "busy", message: "x"},
	}
	for _, tt := range tests {
		for _, side := range []string{"client", "app"} {
			t.Run(tt.name+"/"+side, func(t *testing.T) {
				s := session.New("test", nil)
				var c protocol.Capability
				var owner session.Peer
				if side == "client" {
					c, owner = clientCap("peer.tool"), session.Client
				} else {
					c, owner = appCap("calendar", "peer.tool"), session.App("calendar")
				}
				if tt.outSchema != "" {
					c.OutputSchema = json.RawMessage(tt.outSchema)
				}
				if err := s.Register(owner, c); err != nil {
					t.Fatal(err)
				}
				var got *protocol.CapabilityInvoked
				answer(t, s, owner, "peer.tool", func(inv *protocol.CapabilityInvoked) json.RawMessage {
					got = inv
					return json.RawMessage(tt.result)
				})
				out := s.Invoke(waitCtx(t), protocol.AudienceLLM, "peer.tool", textInput)
				if tt.code == "" {
					wantValue(t, out, tt.value)
				} else {
					wantCode(t, out, tt.code)
					if !strings.Contains(out.Err.Message, tt.message) {
						t.Errorf("message %q does not carry %q", out.Err.Message, tt.message)
					}
				}
				o := theOutcome(t, s, out)
				if got == nil || got.CallID != o.CallID || got.InvokedBy != protocol.InvokedByAgent || !jsonEqual(got.Input, textInput) {
					t.Errorf("the peer was sent %s", jsonOf(t, got))
				}
			})
		}
	}
}

// TestResultRules: who may answer, and when.
func TestResultRules(t *testing.T) {
	result := func(id, v string) *protocol.CapabilityResult {
		return &protocol.CapabilityResult{CallID: id, Result: json.RawMessage(v)}
	}
	t.Run("answered only by the owning app", func(t *testing.T) {
		s := session.New("test", nil)
		if err := s.Register(session.App("calendar"), appCap("calendar", "cal.add")); err != nil {
			t.Fatal(err)
		}
		id, done := dispatched(t, s, "cal.add")
		before := state(t, s)
		for _, p := range []session.Peer{session.App("mail"), session.Client, session.Runtime, session.App("")} {
			wantErrCode(t, s.Result(p, result(id, `{"forged":true}`)), protocol.CodeForbidden)
		}
		if after := state(t, s); after != before {
			t.Fatalf("a forbidden result changed the session: %s", after)
		}
		if err := s.Result(session.App("calendar"), result(id, `{"added":true}`)); err != nil {
			t.Fatal(err)
		}
		out := recv(t, done, "the outcome")
		wantValue(t, out, `{"added":true}`)
		theOutcome(t, s, out)
	})
	t.Run("answered only by the client", func(t *testing.T) {
		s := session.New("test", nil)
		if err := s.Register(session.Client, clientCap("platform.react")); err != nil {
			t.Fatal(err)
		}
		id, done := dispatched(t, s, "platform.react")
		for _, p := range []session.Peer{session.App("calendar"), session.Runtime} {
			wantErrCode(t, s.Result(p, result(id, `{}`)), protocol.CodeForbidden)
		}
		if err := s.Result(session.Client, result(id, `{"shown":true}`)); err != nil {
			t.Fatal(err)
		}
		wantErrCode(t, s.Result(session.Client, result(id, `{"again":true}`)), protocol.CodeConflict)
		out := recv(t, done, "the outcome")
		wantValue(t, out, `{"shown":true}`)
		theOutcome(t, s, out)
	})
	t.Run("agent calls take no results", func(t *testing.T) {
		s := session.New("test", nil)
		g := newGate(false)
		if err := s.RegisterAgent(agentCap("tool"), g); err != nil {
			t.Fatal(err)
		}
		id, perr := s.Start(protocol.AudienceLLM, "tool", textInput)
		if perr != nil {
			t.Fatal(perr)
		}
		recv(t, g.started, "the handler")
		for _, p := range []session.Peer{session.Runtime, session.Client, session.App("x")} {
			wantErrCode(t, s.Result(p, result(id, `"forged"`)), protocol.CodeForbidden)
		}
		close(g.release)
	})
	t.Run("unknown call", func(t *testing.T) {
		s := session.New("test", nil)
		wantErrCode(t, s.Result(session.Client, result("c-nope", `{}`)), protocol.CodeNotFound)
		if s.LastSeq() != 0 {
			t.Fatal("a result for an unknown call emitted an event")
		}
	})
	t.Run("no result", func(t *testing.T) {
		s := session.New("test", nil)
		if err := s.Register(session.Client, clientCap("platform.react")); err != nil {
			t.Fatal(err)
		}
		id, done := dispatched(t, s, "platform.react")
		wantErrCode(t, s.Result(session.Client, &protocol.CapabilityResult{CallID: id}), protocol.CodeInvalidRequest)
		if err := s.Cancel(id, ""); err != nil {
			t.Fatal(err)
		}
		recv(t, done, "the outcome")
	})
	for _, how := range []string{"timeout", "cancel"} {
		t.Run("late result after "+how, func(t *testing.T) {
			s, rec := recordingSession(session.Options{})
			c := clientCap("platform.react")
			if how == "timeout" {
				c.CallTimeoutMs = ms(50)
			}
			if err := s.Register(session.Client, c); err != nil {
				t.Fatal(err)
			}
			id, done := dispatched(t, s, "platform.react")
			if how == "cancel" {
				if err := s.Cancel(id, "stop"); err != nil {
					t.Fatal(err)
				}
			}
			out := recv(t, done, "the outcome")
			want := protocol.CodeTimeout
			if how == "cancel" {
				want = protocol.CodeCancelled
			}
			wantCode(t, out, want)
			before := state(t, s)
			err := s.Result(session.Client, result(id, `{"shown":true}`))
			wantErrCode(t, err, protocol.CodeConflict)
			if !strings.Contains(err.Error(), string(want)) {
				t.Errorf("error %q does not say how the call ended (%s)", err, want)
			}
			if after := state(t, s); after != before {
				t.Errorf("a late result changed the session")
			}
			if _, ok := rec.find("result dropped", map[string]string{"call": id}); !ok {
				t.Errorf("the late result was not logged; logs:\n%s", rec)
			}
			o := theOutcome(t, s, out) // still exactly one, unchanged
			if o.Outcome.Err == nil || o.Outcome.Err.Code != want {
				t.Errorf("outcome event %s", jsonOf(t, o))
			}
		})
	}
}

// codedError is a tool's error carrying its own code.
type codedError struct{ code, msg string }

func (e codedError) Error() string            { return e.msg }
func (e codedError) ErrorCode() protocol.Code { return protocol.Code(e.code) }

// TestHandlerOutcomes: what an agent-side handler returns, or how it fails,
// becomes the outcome the caller — the model — reads.
func TestHandlerOutcomes(t *testing.T) {
	const outSchema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	tests := []struct {
		name      string
		handler   session.Handler
		outSchema string
		value     string
		code      protocol.Code
		message   string // the whole message when exact, else a part
		exact     bool
	}{
		{name: "value", handler: returns(`{"n":1}`, nil), value: `{"n":1}`},
		{name: "no value", handler: returns("", nil), value: `null`},
		{name: "coded error", handler: returns("", codedError{"rate_limited", "slow down"}), code: "rate_limited", message: "slow down", exact: true},
		{name: "wrapped coded error", handler: returns("", fmt.Errorf("fetch: %w", codedError{"upstream.down", "502"})),
			code: "upstream.down", message: "fetch: 502", exact: true},
		{name: "protocol error", handler: returns("", &protocol.Error{Code: "quota.exceeded", Message: "no quota"}),
			code: "quota.exceeded", message: "no quota", exact: true},
		{name: "wrapped protocol error", handler: returns("", fmt.Errorf("step 2: %w", protocol.Errorf(protocol.CodeDenied, "no grant"))),
			code: protocol.CodeDenied, message: "step 2: denied: no grant", exact: true},
		{name: "code that is no identifier", handler: returns("", codedError{"Bad Code", "odd"}), code: protocol.CodeToolError, message: "odd", exact: true},
		{name: "plain error reaches the model", handler: returns("", errors.New("disk full: /var is at 100%")),
			code: protocol.CodeToolError, message: "disk full: /var is at 100%", exact: true},
		{name: "value and error", handler: returns(`{"n":1}`, errors.New("half done")), code: protocol.CodeToolError, message: "half done", exact: true},
		{name: "handler's own deadline", handler: returns("", fmt.Errorf("dial: %w", context.DeadlineExceeded)), code: protocol.CodeTimeout},
		{name: "not JSON", handler: returns(`{"n":`, nil), code: protocol.CodeInvalidOutput, message: "not valid JSON"},
		{name: "output schema met", handler: returns(`{"n":2}`, nil), outSchema: outSchema, value: `{"n":2}`},
		{name: "output schema broken", handler: returns(`{"n":"two"}`, nil), outSchema: outSchema, code: protocol.CodeInvalidOutput, message: `at "/n"`},
		{name: "output schema and no value", handler: returns("", nil), outSchema: outSchema, code: protocol.CodeInvalidOutput},
		{name: "panic", handler: session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { panic("boom") }),
			code: protocol.CodeInternal, message: `"tool" crashed`},
		{name: "panic with an error", handler: session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
			panic(errors.New("nil map"))
		}), code: protocol.CodeInternal},
		{name: "runtime error panic", handler: session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
			return json.RawMessage{c.Input[len(c.Input)]}, nil // index out of range
		}), code: protocol.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			c := agentCap("tool")
			if tt.outSchema != "" {
				c.OutputSchema = json.RawMessage(tt.outSchema)
			}
			if err := s.RegisterAgent(c, tt.handler); err != nil {
				t.Fatal(err)
			}
			out := s.Invoke(waitCtx(t), protocol.AudienceLLM, "tool", textInput)
			if tt.code == "" {
				wantValue(t, out, tt.value)
			} else {
				wantCode(t, out, tt.code)
				if tt.exact && out.Err.Message != tt.message || !strings.Contains(out.Err.Message, tt.message) {
					t.Errorf("message %q, want %q", out.Err.Message, tt.message)
				}
			}
			theOutcome(t, s, out)
		})
	}
	t.Run("the session keeps serving after panics", func(t *testing.T) {
		s := session.New("test", nil)
		if err := s.RegisterAgent(agentCap("crash"), session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
			panic("boom")
		})); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterAgent(agentCap("echo"), echo); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			wantCode(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "crash", textInput), protocol.CodeInternal)
			in := json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, i))
			wantValue(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "echo", in), string(in))
		}
		if n := len(only[*protocol.CapabilityOutcome](allEvents(t, s))); n != 40 {
			t.Errorf("%d outcome events for 40 calls", n)
		}
	})
}

// TestFireAndForget: the call resolves {} at once; an agent-side handler
// still runs, in the background; a client needs to send no result.
func TestFireAndForget(t *testing.T) {
	t.Run("agent", func(t *testing.T) {
		s, rec := recordingSession(session.Options{})
		c := agentCap("notify")
		c.FireAndForget = true
		g := newGate(false)
		if err := s.RegisterAgent(c, g); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		out := s.Invoke(ctx, protocol.AudienceLLM, "notify", textInput) // returns while the handler blocks
		wantValue(t, out, `{}`)
		o := theOutcome(t, s, out)
		call := recv(t, g.started, "the background handler")
		if call.ID != o.CallID {
			t.Errorf("the background handler runs call %s, the outcome is for %s", call.ID, o.CallID)
		}
		cancel() // the caller's cancellation does not reach the background handler
		close(g.release)
		if err := recv(t, g.stopped, "the background handler to finish"); err != nil {
			t.Errorf("the background handler's context ended (%v) with the caller's", err)
		}
		if n := len(only[*protocol.CapabilityOutcome](allEvents(t, s))); n != 1 {
			t.Errorf("%d outcome events, want 1", n)
		}
		if _, ok := rec.find("fire-and-forget handler failed", nil); ok {
			t.Errorf("a successful background handler was logged as failed:\n%s", rec)
		}
	})
	t.Run("agent handler bounded and logged", func(t *testing.T) {
		s, rec := recordingSession(session.Options{})
		c := agentCap("notify")
		c.FireAndForget = true
		c.CallTimeoutMs = ms(50)
		g := newGate(false)
		if err := s.RegisterAgent(c, g); err != nil {
			t.Fatal(err)
		}
		wantValue(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "notify", textInput), `{}`)
		if err := recv(t, g.stopped, "the call timeout to end the background handler"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("background handler's ctx ended with %v, want the call timeout", err)
		}
		rec.wait(t, "fire-and-forget handler failed", map[string]string{"code": "timeout"})
	})
	t.Run("agent handler panics", func(t *testing.T) {
		s := session.New("test", nil)
		c := agentCap("notify")
		c.FireAndForget = true
		ran := make(chan struct{})
		if err := s.RegisterAgent(c, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
			close(ran)
			panic("boom")
		})); err != nil {
			t.Fatal(err)
		}
		wantValue(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "notify", textInput), `{}`)
		recv(t, ran, "the background handler")
		if err := s.RegisterAgent(agentCap("echo"), echo); err != nil {
			t.Fatal(err)
		}
		wantValue(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "echo", textInput), string(textInput))
	})
	t.Run("client", func(t *testing.T) {
		j := &memJournal{}
		s := session.New("test", &session.Options{Journal: j})
		c := clientCap("platform.react")
		c.FireAndForget = true
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
		out := s.Invoke(waitCtx(t), protocol.AudienceLLM, "platform.react", textInput) // nobody answers
		wantValue(t, out, `{}`)
		o := theOutcome(t, s, out)
		want := []protocol.Type{protocol.TypeCapabilityInvoked, protocol.TypeCapabilityOutcome}
		if tr := trail(allEvents(t, s), o.CallID); !slices.Equal(tr, want) {
			t.Errorf("call events %v, want %v", tr, want)
		}
		// The spec lets the client send the result all the same: it is
		// accepted, and changes nothing — here and once the session is
		// restored from its journal.
		restored, err := session.Restore("test", j.events(t), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*session.Session{s, restored} {
			before := len(allEvents(t, s))
			for range 2 {
				if err := s.Result(session.Client, &protocol.CapabilityResult{CallID: o.CallID, Result: json.RawMessage(`{"shown":true}`)}); err != nil {
					t.Errorf("the result of a fire-and-forget call: %v, want it accepted", err)
				}
			}
			if n := len(allEvents(t, s)); n != before {
				t.Errorf("%d events after the results, want the %d before", n, before)
			}
			err := s.Approve(session.Client, &protocol.CapabilityApprove{CallID: o.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada"})
			wantErrCode(t, err, protocol.CodeConflict)
			if !strings.Contains(err.Error(), "fire-and-forget") {
				t.Errorf("an approval of a fire-and-forget call that ran: %v, want it to say so", err)
			}
			// Only its owner's result: another peer's is refused, as for
			// any call that finished.
			err = s.Result(session.App("mallory"), &protocol.CapabilityResult{CallID: o.CallID, Result: json.RawMessage(`{}`)})
			wantErrCode(t, err, protocol.CodeConflict)
		}
		// A call of a fire-and-forget capability that never ran is not
		// one whose result may come.
		c.RequiresApproval = true
		c.Description = "React, once approved."
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
		sub := watch(t, s)
		ctx, cancel := context.WithCancel(waitCtx(t))
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "platform.react", textInput) }()
		req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
		cancel()
		if out := recv(t, done, "the cancelled call"); out.IsOK() {
			t.Fatalf("a cancelled call awaiting approval: %+v", out)
		}
		err = s.Result(session.Client, &protocol.CapabilityResult{CallID: req.CallID, Result: json.RawMessage(`{}`)})
		wantErrCode(t, err, protocol.CodeConflict)
	})
}

// TestFireAndForgetResultOnlyAsTheCallWasMade: a late result is taken for
// a fire-and-forget call only as its registration was when the call was
// dispatched, and only for a call a peer answers — not for an agent-side
// call (its handler answers), nor, live or restored, for a call made to a
// registration that became fire-and-forget after it was dispatched.
func TestFireAndForgetResultOnlyAsTheCallWasMade(t *testing.T) {
	t.Run("agent side", func(t *testing.T) {
		s := session.New("test", nil)
		c := agentCap("notify")
		c.FireAndForget = true
		if err := s.RegisterAgent(c, echo); err != nil {
			t.Fatal(err)
		}
		o := theOutcome(t, s, s.Invoke(waitCtx(t), protocol.AudienceLLM, "notify", textInput))
		for _, p := range []session.Peer{session.Runtime, session.Client} { // its owner, whose handler answers it, and another
			err := s.Result(p, &protocol.CapabilityResult{CallID: o.CallID, Result: json.RawMessage(`{}`)})
			wantErrCode(t, err, protocol.CodeConflict)
		}
	})
	t.Run("became fire-and-forget after dispatch", func(t *testing.T) {
		j := &memJournal{}
		s := session.New("test", &session.Options{Journal: j})
		c := clientCap("x")
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
		id, done := dispatched(t, s, "x")
		c.FireAndForget, c.Description = true, "now fire-and-forget"
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
		if err := s.Result(session.Client, &protocol.CapabilityResult{CallID: id, Result: json.RawMessage(`{"a":1}`)}); err != nil {
			t.Fatal(err)
		}
		wantValue(t, recv(t, done, "the outcome"), `{"a":1}`)
		r, err := session.Restore("test", j.events(t), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		late := &protocol.CapabilityResult{CallID: id, Result: json.RawMessage(`{"a":2}`)}
		wantErrCode(t, s.Result(session.Client, late), protocol.CodeConflict)
		wantErrCode(t, r.Result(session.Client, late), protocol.CodeConflict)
	})
}

// TestTimeout: callTimeoutMs (or Options.DefaultCallTimeout) bounds the
// wait; the handler's context ends with context.DeadlineExceeded.
func TestTimeout(t *testing.T) {
	tests := []struct {
		name string
		opts *session.Options
		side protocol.Side
		ms   int64
	}{
		{"client callTimeoutMs", nil, protocol.SideClient, 50},
		{"app callTimeoutMs", nil, protocol.SideApp, 50},
		{"agent callTimeoutMs", nil, protocol.SideAgent, 50},
		{"client default", &session.Options{DefaultCallTimeout: 50 * time.Millisecond}, protocol.SideClient, 0},
		{"agent default", &session.Options{DefaultCallTimeout: 50 * time.Millisecond}, protocol.SideAgent, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", tt.opts)
			var c protocol.Capability
			var err error
			g := newGate(false)
			switch tt.side {
			case protocol.SideClient:
				c = clientCap("slow")
			case protocol.SideApp:
				c = appCap("calendar", "slow")
			default:
				c = agentCap("slow")
			}
			if tt.ms > 0 {
				c.CallTimeoutMs = ms(tt.ms)
			}
			switch tt.side {
			case protocol.SideClient:
				err = s.Register(session.Client, c)
			case protocol.SideApp:
				err = s.Register(session.App("calendar"), c)
			default:
				err = s.RegisterAgent(c, g)
			}
			if err != nil {
				t.Fatal(err)
			}
			out := s.Invoke(waitCtx(t), protocol.AudienceLLM, "slow", textInput) // nobody answers
			wantCode(t, out, protocol.CodeTimeout)
			if !strings.Contains(out.Err.Message, "50ms") {
				t.Errorf("message %q does not name the limit", out.Err.Message)
			}
			if tt.side == protocol.SideAgent {
				if err := recv(t, g.stopped, "the handler's context to end"); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("handler's ctx.Err() = %v, want context.DeadlineExceeded", err)
				}
			}
			theOutcome(t, s, out)
		})
	}
}

// TestLongestTimeout: a callTimeoutMs past what a timer holds waits as
// long as one can (protocol.MaxCallTimeoutMs) — it wrapped around to a
// negative duration, and the call timed out at once.
func TestLongestTimeout(t *testing.T) {
	for _, v := range []int64{protocol.MaxCallTimeoutMs, protocol.MaxCallTimeoutMs + 1, math.MaxInt64} {
		s := session.New("test", nil)
		c := clientCap("patient")
		c.CallTimeoutMs = ms(v)
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
		id, done := dispatched(t, s, "patient")
		if err := s.Result(session.Client, &protocol.CapabilityResult{CallID: id, Result: json.RawMessage(`{"ok":true}`)}); err != nil {
			t.Fatalf("callTimeoutMs %d: the result: %v (the call ended before it)", v, err)
		}
		wantValue(t, recv(t, done, "the outcome"), `{"ok":true}`)
	}
}

// TestCancel: Session.Cancel and the caller's context end a call with
// cancelled, and the handler's context is done.
func TestCancel(t *testing.T) {
	type ender func(t *testing.T, s *session.Session, id string, cancelCaller context.CancelFunc)
	byID := func(t *testing.T, s *session.Session, id string, _ context.CancelFunc) {
		if err := s.Cancel(id, "the user pressed stop"); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
	}
	byCaller := func(_ *testing.T, _ *session.Session, _ string, cancel context.CancelFunc) { cancel() }
	tests := []struct {
		name    string
		side    protocol.Side
		end     ender
		message string
	}{
		{"agent by id", protocol.SideAgent, byID, "the user pressed stop"},
		{"agent by the caller", protocol.SideAgent, byCaller, "cancelled"},
		{"client by id", protocol.SideClient, byID, "the user pressed stop"},
		{"client by the caller", protocol.SideClient, byCaller, "cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			g := newGate(false)
			var err error
			if tt.side == protocol.SideAgent {
				err = s.RegisterAgent(agentCap("slow"), g)
			} else {
				err = s.Register(session.Client, clientCap("slow"))
			}
			if err != nil {
				t.Fatal(err)
			}
			sub := watch(t, s)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "slow", textInput) }()
			inv, _ := waitFor[*protocol.CapabilityInvoked](t, sub, nil)
			if tt.side == protocol.SideAgent {
				recv(t, g.started, "the handler")
			}
			tt.end(t, s, inv.CallID, cancel)
			out := recv(t, done, "the cancelled call")
			wantCode(t, out, protocol.CodeCancelled)
			if !strings.Contains(out.Err.Message, tt.message) {
				t.Errorf("message %q does not carry %q", out.Err.Message, tt.message)
			}
			if tt.side == protocol.SideAgent {
				if err := recv(t, g.stopped, "the handler's context to end"); !errors.Is(err, context.Canceled) {
					t.Errorf("handler's ctx.Err() = %v, want context.Canceled", err)
				}
			}
			theOutcome(t, s, out)
			wantErrCode(t, s.Cancel(inv.CallID, ""), protocol.CodeConflict) // already finished
		})
	}
	t.Run("caller's deadline", func(t *testing.T) {
		s := session.New("test", nil)
		g := newGate(false)
		if err := s.RegisterAgent(agentCap("slow"), g); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		out := s.Invoke(ctx, protocol.AudienceLLM, "slow", textInput)
		wantCode(t, out, protocol.CodeTimeout)
		if err := recv(t, g.stopped, "the handler's context to end"); err == nil {
			t.Error("the handler's context is not done")
		}
		theOutcome(t, s, out)
	})
	t.Run("caller cancelled before the call", func(t *testing.T) {
		s := session.New("test", nil)
		if err := s.Register(session.Client, clientCap("slow")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out := s.Invoke(ctx, protocol.AudienceLLM, "slow", textInput)
		wantCode(t, out, protocol.CodeCancelled)
		theOutcome(t, s, out)
	})
	t.Run("Start then Cancel", func(t *testing.T) {
		s := session.New("test", nil)
		g := newGate(false)
		if err := s.RegisterAgent(agentCap("slow"), g); err != nil {
			t.Fatal(err)
		}
		id, perr := s.Start(protocol.AudienceLLM, "slow", textInput)
		if perr != nil || id == "" {
			t.Fatalf("Start = %q, %v", id, perr)
		}
		sub := s.Subscribe(0)
		defer sub.Close()
		recv(t, g.started, "the handler")
		if err := s.Cancel(id, ""); err != nil {
			t.Fatal(err)
		}
		o, _ := waitFor(t, sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
		wantCode(t, o.Outcome, protocol.CodeCancelled)
		if err := recv(t, g.stopped, "the handler's context to end"); !errors.Is(err, context.Canceled) {
			t.Errorf("handler's ctx.Err() = %v", err)
		}
		theOutcome(t, s, o.Outcome)
	})
	t.Run("unknown call", func(t *testing.T) {
		s := session.New("test", nil)
		wantErrCode(t, s.Cancel("c-nope", ""), protocol.CodeNotFound)
	})
}

// TestHandlerIgnoringContext: a handler that ignores its context does not
// hold the caller past a timeout or cancel (the go-sdk #1150 bug); its late
// return changes nothing.
func TestHandlerIgnoringContext(t *testing.T) {
	for _, how := range []string{"timeout", "cancel", "caller"} {
		t.Run(how, func(t *testing.T) {
			s := session.New("test", nil)
			c := agentCap("stuck")
			if how == "timeout" {
				c.CallTimeoutMs = ms(50)
			}
			g := newGate(true)
			if err := s.RegisterAgent(c, g); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "stuck", textInput) }()
			call := recv(t, g.started, "the handler")
			switch how {
			case "cancel":
				if err := s.Cancel(call.ID, ""); err != nil {
					t.Fatal(err)
				}
			case "caller":
				cancel()
			}
			// The handler is still blocked: it cannot return before release.
			out := recv(t, done, "Invoke to return while the handler is blocked")
			want := map[string]protocol.Code{"timeout": protocol.CodeTimeout, "cancel": protocol.CodeCancelled, "caller": protocol.CodeCancelled}[how]
			wantCode(t, out, want)
			select {
			case <-g.stopped:
				t.Fatal("the handler returned before it was released")
			default:
			}
			close(g.release)
			if err := recv(t, g.stopped, "the released handler"); err == nil {
				t.Error("the handler's context was not done when it was released")
			}
			o := theOutcome(t, s, out)
			if o.Outcome.Err == nil || o.Outcome.Err.Code != want {
				t.Errorf("outcome event %s", jsonOf(t, o))
			}
		})
	}
}

// TestStart: Start returns the call id at once; the outcome arrives as a
// capability_outcome event.
func TestStart(t *testing.T) {
	s := session.New("test", nil)
	if err := s.RegisterAgent(agentCap("echo"), echo); err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(0)
	defer sub.Close()
	ids := map[string]bool{}
	for range 10 {
		id, err := s.Start(protocol.AudienceRuntime, "echo", textInput)
		if err == nil {
			t.Fatalf("runtime started a call to a default-audience capability: %s", id)
		}
		id, err = s.Start(protocol.AudienceLLM, "echo", textInput)
		if err != nil || id == "" || ids[id] {
			t.Fatalf("Start = %q, %v (ids so far %v)", id, err, ids)
		}
		ids[id] = true
	}
	for len(ids) > 0 {
		o, _ := waitFor[*protocol.CapabilityOutcome](t, sub, nil)
		if !ids[o.CallID] {
			t.Fatalf("outcome for an unknown or repeated call %s", o.CallID)
		}
		delete(ids, o.CallID)
		wantValue(t, o.Outcome, string(textInput))
	}
}

// TestFakeClock runs the time rules in a synctest bubble: exact durations,
// and synctest.Wait to see that a handler's late return changed nothing.
func TestFakeClock(t *testing.T) {
	t.Run("default call timeout", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s := session.New("test", nil)
			if err := s.Register(session.Client, clientCap("slow")); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out := s.Invoke(context.Background(), protocol.AudienceLLM, "slow", textInput) // nobody answers
			wantCode(t, out, protocol.CodeTimeout)
			if d := time.Since(start); d != 60*time.Second {
				t.Errorf("timed out after %s, want the spec's default 60s", d)
			}
			theOutcome(t, s, out)
		})
	})
	t.Run("approval timeout", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s, _, ran := approvalSession(t, nil)
			start := time.Now()
			out := s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) // nobody decides
			wantCode(t, out, protocol.CodeTimeout)
			if d := time.Since(start); d != 10*time.Minute {
				t.Errorf("timed out after %s, want the default ApprovalTimeout of 10m", d)
			}
			o := theOutcome(t, s, out)
			neverDispatched(t, s, o.CallID, ran, out)
		})
	})
	t.Run("Options.ApprovalTimeout", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s, _, ran := approvalSession(t, &session.Options{ApprovalTimeout: time.Second})
			start := time.Now()
			out := s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput)
			wantCode(t, out, protocol.CodeTimeout)
			if d := time.Since(start); d != time.Second {
				t.Errorf("timed out after %s, want 1s", d)
			}
			neverDispatched(t, s, theOutcome(t, s, out).CallID, ran, out)
		})
	})
	for _, how := range []string{"timeout", "cancel", "caller"} {
		t.Run("handler ignoring its context/"+how, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				s := session.New("test", nil)
				g := newGate(true)
				if err := s.RegisterAgent(agentCap("stuck"), g); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				start := time.Now()
				done := make(chan protocol.Outcome, 1)
				go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "stuck", textInput) }()
				call := <-g.started
				want := protocol.CodeCancelled
				switch how {
				case "timeout":
					want = protocol.CodeTimeout
				case "cancel":
					if err := s.Cancel(call.ID, ""); err != nil {
						t.Fatal(err)
					}
				case "caller":
					cancel()
				}
				out := <-done // the handler is still blocked
				wantCode(t, out, want)
				wantWait := time.Duration(0) // Invoke returns at once
				if how == "timeout" {
					wantWait = 60 * time.Second
				}
				if d := time.Since(start); d != wantWait {
					t.Errorf("Invoke returned after %s, want %s", d, wantWait)
				}
				synctest.Wait()
				select {
				case <-g.stopped:
					t.Fatal("the handler returned before it was released")
				default:
				}
				close(g.release)
				synctest.Wait() // the handler has returned and the bridge has seen its late result
				if err := <-g.stopped; err == nil {
					t.Error("the handler's context was not done")
				}
				o := theOutcome(t, s, out) // still one outcome: the late result changed nothing
				if o.Outcome.Err == nil || o.Outcome.Err.Code != want {
					t.Errorf("outcome event %s", jsonOf(t, o))
				}
			})
		})
	}
	t.Run("fire-and-forget handler bounded by the call timeout", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s := session.New("test", nil)
			c := agentCap("notify")
			c.FireAndForget = true
			g := newGate(false)
			if err := s.RegisterAgent(c, g); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			wantValue(t, s.Invoke(context.Background(), protocol.AudienceLLM, "notify", textInput), `{}`)
			if d := time.Since(start); d != 0 {
				t.Errorf("a fire-and-forget call took %s", d)
			}
			if err := <-g.stopped; !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the background handler ended with %v, want the call timeout", err)
			}
			if d := time.Since(start); d != 60*time.Second {
				t.Errorf("the background handler was stopped after %s, want 60s", d)
			}
		})
	})
}

// TestInputKeyTwice: an input holding a key twice in one object is
// invalid_input before anything is published or run — with approval too,
// where the approver's app could show one value and the tool run the
// other (an adversarial probe: fs.read approved for notes.txt read
// secret.txt). A key in another object, or in another case, is another
// key here (a Go tool's decoding refuses case variants: package tool).
func TestInputKeyTwice(t *testing.T) {
	s := session.New("dup", nil)
	ran := 0
	for _, approval := range []bool{false, true} {
		name := fmt.Sprintf("t.read%v", approval)
		if err := s.RegisterAgent(protocol.Capability{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), RequiresApproval: approval,
			Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}},
			session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
				ran++
				return json.RawMessage(`{}`), nil
			})); err != nil {
			t.Fatal(err)
		}
		for _, in := range []string{`{"path":"notes.txt","path":"secret.txt"}`, `{"o":{"path":"a","p\u0061th":"b"}}`} {
			out := s.Invoke(context.Background(), protocol.AudienceLLM, name, json.RawMessage(in))
			if out.Err == nil || out.Err.Code != protocol.CodeInvalidInput || !strings.Contains(out.Err.Message, `the key "path" twice`) {
				t.Fatalf("%s %s: %+v, want invalid_input naming the key", name, in, out)
			}
		}
	}
	if ran != 0 || len(s.Snapshot().PendingCalls) != 0 {
		t.Fatalf("ran %d times, %d calls pending", ran, len(s.Snapshot().PendingCalls))
	}
	if out := s.Invoke(context.Background(), protocol.AudienceLLM, "t.readfalse", json.RawMessage(`{"path":"a","PATH":"b","o":{"path":"c"}}`)); out.Err != nil || ran != 1 {
		t.Fatalf("distinct keys: %+v, ran %d", out, ran)
	}
}
