package session_test

import (
	"context"
	"encoding/json"
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

// TestOperatorTrust: an operator decides, invokes as the user and cancels;
// it never registers, deregisters or answers calls.
func TestOperatorTrust(t *testing.T) {
	op := session.Operator("ops")
	frame := func(m protocol.Message) *protocol.Frame {
		return &protocol.Frame{V: protocol.Version, ID: "f1", Msg: m}
	}
	tests := []struct {
		name string
		msg  func(s *session.Session) protocol.Message
		code protocol.Code // "" for an ack
	}{
		{name: "register", code: protocol.CodeForbidden, msg: func(*session.Session) protocol.Message {
			return &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.toast")}}
		}},
		{name: "deregister", code: protocol.CodeForbidden, msg: func(*session.Session) protocol.Message {
			return &protocol.CapabilityDeregister{Names: []string{"ui.show"}}
		}},
		{name: "result", code: protocol.CodeForbidden, msg: func(s *session.Session) protocol.Message {
			id, err := s.Start(protocol.AudienceLLM, "ui.show", textInput)
			if err != nil {
				t.Fatal(err)
			}
			return &protocol.CapabilityResult{CallID: id, Result: json.RawMessage(`{}`)}
		}},
		{name: "invoke", msg: func(*session.Session) protocol.Message {
			return &protocol.CapabilityInvoke{Name: "ui.show", Input: textInput}
		}},
		{name: "cancel", msg: func(s *session.Session) protocol.Message {
			id, err := s.Start(protocol.AudienceLLM, "ui.show", textInput)
			if err != nil {
				t.Fatal(err)
			}
			return &protocol.CapabilityCancel{CallID: id}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("op", nil)
			c := clientCap("ui.show")
			c.UserInvokable = new(true)
			if err := s.Register(session.Client, c); err != nil {
				t.Fatal(err)
			}
			before := s.Snapshot().Capabilities
			reply := s.HandleFrame(op, frame(tt.msg(s)))
			e, isErr := reply.Msg.(*protocol.ErrorReply)
			switch {
			case tt.code == "" && isErr:
				t.Fatalf("refused: %s: %s", e.Code, e.Message)
			case tt.code != "" && !isErr:
				t.Fatalf("accepted %T, want %s", reply.Msg, tt.code)
			case tt.code != "" && e.Code != tt.code:
				t.Fatalf("code %s (%s), want %s", e.Code, e.Message, tt.code)
			case tt.code != "" && !strings.Contains(e.Message, "operator"):
				t.Errorf("message %q does not name the operator", e.Message)
			}
			if after := s.Snapshot().Capabilities; len(after) != len(before) {
				t.Errorf("capabilities changed: %d -> %d", len(before), len(after))
			}
		})
	}
}

// TestOperatorApproves: an operator's decision runs the call, and who
// decided is reported with the authenticated name and the frame's field.
func TestOperatorApproves(t *testing.T) {
	var mu sync.Mutex
	var decided []session.CallEvent
	s, sub, ran := approvalSession(t, &session.Options{Observe: func(e session.CallEvent) {
		if e.Kind == session.ApprovalDecided {
			mu.Lock()
			decided = append(decided, e)
			mu.Unlock()
		}
	}})
	done := make(chan protocol.Outcome, 1)
	go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()
	req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
	if err := s.Approve(session.Operator("ops"), approvalOf(req, protocol.DecisionApproved, "Ada")); err != nil {
		t.Fatal(err)
	}
	if out := recv(t, done, "outcome"); !out.IsOK() {
		t.Fatalf("outcome %v", out.Err)
	}
	if ran.Load() != 1 {
		t.Fatalf("ran %d times", ran.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(decided) != 1 || decided[0].DecidedBy != "operator (ops) (Ada)" || decided[0].Decision != protocol.DecisionApproved {
		t.Fatalf("decided events %+v", decided)
	}
}

// TestObserve: every point of a call's life is reported once, in order,
// with the call's identity; a refused call reports nothing.
func TestObserve(t *testing.T) {
	var mu sync.Mutex
	var got []session.CallEvent
	// A refused call's CallFinished is reported before Invoke returns, like
	// any other (TestObserveBeforeReturn); the channel counts them.
	finished := make(chan struct{}, 4)
	opts := &session.Options{Observe: func(e session.CallEvent) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
		if e.Kind == session.CallFinished {
			finished <- struct{}{}
		}
	}}
	tests := []struct {
		name     string
		approval bool
		want     []session.CallEventKind
	}{
		{name: "plain", want: []session.CallEventKind{session.CallStarted, session.CallDispatched, session.CallFinished}},
		{name: "approval", approval: true, want: []session.CallEventKind{session.CallStarted, session.ApprovalRequested,
			session.ApprovalDecided, session.CallDispatched, session.CallFinished}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			s := session.New("obs", opts)
			c := agentCap("echo")
			c.RequiresApproval = tt.approval
			if err := s.RegisterAgent(c, echo); err != nil {
				t.Fatal(err)
			}
			if out := s.Invoke(context.Background(), protocol.AudienceLLM, "nope", nil); out.IsOK() {
				t.Fatal("unknown capability ran")
			}
			// A refused call reports only its CallFinished, with its code.
			recv(t, finished, "the refused call's call_finished")
			mu.Lock()
			if len(got) != 1 || got[0].Kind != session.CallFinished || got[0].Name != "nope" || got[0].CallID == "" ||
				got[0].Outcome.Err == nil || got[0].Outcome.Err.Code != protocol.CodeNotFound {
				t.Errorf("a refused call reported %+v, want one call_finished with not_found", got)
			}
			got = nil
			mu.Unlock()
			sub := watch(t, s)
			type key struct{}
			ctx := context.WithValue(context.Background(), key{}, "parent")
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "echo", textInput) }()
			if tt.approval {
				req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
				if err := s.Approve(session.Client, approvalOf(req, protocol.DecisionApproved, "ada")); err != nil {
					t.Fatal(err)
				}
			}
			if out := recv(t, done, "outcome"); !out.IsOK() {
				t.Fatalf("outcome %v", out.Err)
			}
			recv(t, finished, "call_finished")
			mu.Lock()
			defer mu.Unlock()
			kinds := make([]session.CallEventKind, len(got))
			for i, e := range got {
				kinds[i] = e.Kind
				if e.Session != "obs" || e.Name != "echo" || e.CallID == "" || e.CallID != got[0].CallID ||
					e.Origin.Kind != protocol.OriginAgent || e.Side != protocol.SideAgent || e.Invoker != protocol.AudienceLLM || e.Time.IsZero() {
					t.Errorf("event %d (%s) = %+v", i, e.Kind, e)
				}
			}
			if !slices.Equal(kinds, tt.want) {
				t.Fatalf("kinds %v, want %v", kinds, tt.want)
			}
			if got[0].Context == nil || got[0].Context.Value(key{}) != "parent" {
				t.Error("CallStarted does not carry the invoker's context")
			}
			if last := got[len(got)-1]; !last.Outcome.IsOK() || string(last.Outcome.Value) != string(textInput) {
				t.Errorf("CallFinished outcome %+v", last.Outcome)
			}
		})
	}
}

// TestObserveBeforeReturn: Invoke returns only once Observe has seen the
// call's CallFinished, whichever path ended it (the handler's return, a
// deregistration while the call was pending), so that what an operator
// reads about a call (its call times, the metrics) is complete when its
// caller has the outcome. A slow observer (a second on the fake clock)
// makes the order visible: a caller woken first would return with the
// event not yet recorded.
func TestObserveBeforeReturn(t *testing.T) {
	run := func(t *testing.T, setup func(s *session.Session) string, end func(s *session.Session)) {
		var recorded atomic.Bool
		s := session.New("obs", &session.Options{Observe: func(e session.CallEvent) {
			if e.Kind == session.CallFinished {
				time.Sleep(time.Second) // a slow observer, on the bubble's clock
				recorded.Store(true)
			}
		}})
		name := setup(s)
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, name, textInput) }()
		synctest.Wait()
		if end != nil {
			end(s)
		}
		<-done
		if !recorded.Load() {
			t.Fatal("Invoke returned before Observe had seen the call finish")
		}
	}
	t.Run("the handler returned", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			run(t, func(s *session.Session) string {
				if err := s.RegisterAgent(agentCap("echo"), echo); err != nil {
					t.Fatal(err)
				}
				return "echo"
			}, nil)
		})
	})
	t.Run("deregistered while pending", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			run(t, func(s *session.Session) string {
				if err := s.Register(session.Client, clientCap("slow")); err != nil {
					t.Fatal(err)
				}
				return "slow"
			}, func(s *session.Session) {
				if err := s.Deregister(session.Client, "slow"); err != nil {
					t.Fatal(err)
				}
			})
		})
	})
}

// approvalOf answers an approval request, echoing what the request carries.
func approvalOf(req *protocol.ApprovalRequested, d protocol.Decision, by string) *protocol.CapabilityApprove {
	return &protocol.CapabilityApprove{CallID: req.CallID, Decision: d, DecidedBy: by, InputDigest: req.InputDigest}
}
