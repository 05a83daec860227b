package session_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// countingCap registers an agent capability requiring approval whose
// handler counts its runs and reports each input it ran on.
func countingCap(t *testing.T, s *session.Session, name string) (*atomic.Int32, chan json.RawMessage) {
	t.Helper()
	ran := new(atomic.Int32)
	inputs := make(chan json.RawMessage, 64)
	c := agentCap(name)
	c.RequiresApproval = true
	if err := s.RegisterAgent(c, session.HandlerFunc(func(_ context.Context, call *session.Call) (json.RawMessage, error) {
		ran.Add(1)
		inputs <- call.Input
		return json.RawMessage(`{"done":true}`), nil
	})); err != nil {
		t.Fatal(err)
	}
	return ran, inputs
}

// TestApprovalRunsAtMostOnce: many concurrent capability_approve frames
// for one call, from the client and from operators, and the same frame
// replayed afterwards: exactly one is accepted and the call runs once.
func TestApprovalRunsAtMostOnce(t *testing.T) {
	s := session.New("once", nil)
	ran, _ := countingCap(t, s, "fs.delete")
	sub := watch(t, s)
	done := make(chan protocol.Outcome, 1)
	go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()
	req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
	frame := fmt.Sprintf(`{"type":"capability_approve","callId":%q,"decision":"approved","decidedBy":"ada","inputDigest":%q}`, req.CallID, req.InputDigest)
	const racers = 64
	var acks atomic.Int32
	var wg sync.WaitGroup
	for i := range racers {
		p := session.Client
		if i%2 == 1 {
			p = session.Operator(fmt.Sprint("op", i))
		}
		wg.Go(func() {
			reply := s.HandleFrame(p, decodeFrame(t, fmt.Sprint("a", i), frame))
			switch m := reply.Msg.(type) {
			case *protocol.Ack:
				acks.Add(1)
			case *protocol.ErrorReply:
				if m.Code != protocol.CodeConflict {
					t.Errorf("a losing decision: %s %s, want conflict", m.Code, m.Message)
				}
			}
		})
	}
	wg.Wait()
	if out := recv(t, done, "outcome"); !out.IsOK() {
		t.Fatalf("outcome %+v", out.Err)
	}
	// Replayed after the call ran.
	reply := s.HandleFrame(session.Client, decodeFrame(t, "replay", frame))
	if e, ok := reply.Msg.(*protocol.ErrorReply); !ok || e.Code != protocol.CodeConflict {
		t.Errorf("replayed approval: %s, want conflict", jsonOf(t, reply.Msg))
	}
	if acks.Load() != 1 || ran.Load() != 1 {
		t.Fatalf("%d decisions accepted, the handler ran %d times; want 1 and 1", acks.Load(), ran.Load())
	}
	if n := len(only[*protocol.ApprovalDecided](allEvents(t, s))); n != 1 {
		t.Errorf("%d approval_decided events, want 1", n)
	}
}

// TestApprovalBoundToInput: the digest covers the revision, the name and
// the exact input bytes the approver saw; the handler runs on those bytes;
// another call's digest is refused and changes nothing.
func TestApprovalBoundToInput(t *testing.T) {
	s := session.New("bound", nil)
	_, inputs := countingCap(t, s, "fs.delete")
	sub := watch(t, s)
	// Whitespace and characters events escape: the input is kept as events
	// carry it.
	raw := json.RawMessage(`{ "text" : "<b>&" }`)
	done := make(chan protocol.Outcome, 2)
	go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", raw) }()
	first, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
	go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()
	second, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)

	wire, err := protocol.EncodeMessage(first)
	if err != nil {
		t.Fatal(err)
	}
	var onWire struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(wire, &onWire); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(first.Revision + "\n" + first.Name + "\n" + string(onWire.Input)))
	if want := "sha256:" + hex.EncodeToString(sum[:]); first.InputDigest != want {
		t.Fatalf("inputDigest %s, want sha256(revision \\n name \\n input as sent) = %s", first.InputDigest, want)
	}
	if first.InputDigest == second.InputDigest {
		t.Fatal("two inputs share a digest")
	}
	before := s.LastSeq()
	err = s.Approve(session.Client, &protocol.CapabilityApprove{CallID: first.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: second.InputDigest})
	wantErrCode(t, err, protocol.CodeStaleApproval)
	if s.LastSeq() != before || digestOf(s, first.CallID) != first.InputDigest {
		t.Fatal("a refused decision changed the session")
	}
	if err := s.Approve(session.Client, approvalOf(first, protocol.DecisionApproved, "ada")); err != nil {
		t.Fatal(err)
	}
	got := recv(t, inputs, "the handler's input")
	if string(got) != string(onWire.Input) {
		t.Errorf("the handler ran on %s, the approver saw %s", got, onWire.Input)
	}
	if out := recv(t, done, "outcome"); !out.IsOK() {
		t.Fatalf("outcome %+v", out.Err)
	}
	inv, _ := waitFor(t, sub, func(m *protocol.CapabilityInvoked) bool { return m.CallID == first.CallID })
	if b, _ := json.Marshal(inv.Input); string(b) != string(onWire.Input) {
		t.Errorf("capability_invoked carries %s, the approver saw %s", b, onWire.Input)
	}
	_ = s.Cancel(second.CallID, "")
}

// TestDecisionRecordsWhoDecided: approval_decided names the authenticated
// peer and what the frame claimed, and is journaled.
func TestDecisionRecordsWhoDecided(t *testing.T) {
	j := &memJournal{}
	s := session.New("who", &session.Options{Journal: j})
	countingCap(t, s, "fs.delete")
	sub := watch(t, s)
	id, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
	if perr != nil {
		t.Fatal(perr)
	}
	req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
	if err := s.Approve(session.Operator("alice"), &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionRejected, DecidedBy: "Mallory", Feedback: "no"}); err != nil {
		t.Fatal(err)
	}
	d, _ := waitFor[*protocol.ApprovalDecided](t, sub, nil)
	want := protocol.ApprovalDecided{CallID: id, Name: "fs.delete", Decision: protocol.DecisionRejected, DecidedBy: "Mallory",
		Decider: protocol.Decider{Side: "operator", Name: "alice"}, Feedback: "no"}
	if *d != want {
		t.Fatalf("approval_decided %s, want %s", jsonOf(t, d), jsonOf(t, want))
	}
	journaled := only[*protocol.ApprovalDecided](j.events(t))
	if len(journaled) != 1 || *journaled[0] != want {
		t.Fatalf("journaled decisions %s", jsonOf(t, journaled))
	}
	_ = req
}

// failingJournal refuses approval_decided events while fail is set.
type failingJournal struct {
	memJournal
	fail atomic.Bool
}

func (j *failingJournal) Append(e session.Event) error {
	if j.fail.Load() && e.Msg.MessageType() == protocol.TypeApprovalDecided {
		return errors.New("disk full")
	}
	return j.memJournal.Append(e)
}

// TestDecisionJournaledFirst: an approval the journal fails to store is
// not acted on: the call ends unavailable without running, and the
// approver is told. A rejection goes through (it runs nothing).
func TestDecisionJournaledFirst(t *testing.T) {
	for _, d := range []protocol.Decision{protocol.DecisionApproved, protocol.DecisionRejected} {
		t.Run(string(d), func(t *testing.T) {
			j := &failingJournal{}
			j.fail.Store(true)
			s := session.New("durable", &session.Options{Journal: j})
			ran, _ := countingCap(t, s, "fs.delete")
			sub := watch(t, s)
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()
			req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			err := s.Approve(session.Client, approvalOf(req, d, "ada"))
			out := recv(t, done, "outcome")
			if d == protocol.DecisionApproved {
				wantErrCode(t, err, protocol.CodeUnavailable)
				wantCode(t, out, protocol.CodeUnavailable)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				wantCode(t, out, protocol.CodeRejected)
			}
			if ran.Load() != 0 {
				t.Fatal("the call ran on a decision the journal does not hold")
			}
			j.fail.Store(false)
			wantErrCode(t, s.Approve(session.Client, approvalOf(req, protocol.DecisionApproved, "ada")), protocol.CodeConflict)
		})
	}
}

// TestDecisionSurvivesRestart: a decision journaled before the process died
// is applied once after Restore and never asked for or accepted again.
func TestDecisionSurvivesRestart(t *testing.T) {
	// crashAt cuts the journal just after the first event of type typ.
	crashAt := func(t *testing.T, evs []session.Event, typ protocol.Type) []session.Event {
		for i, e := range evs {
			if e.Msg.MessageType() == typ {
				return evs[:i+1]
			}
		}
		t.Fatalf("no %s in the journal", typ)
		return nil
	}
	tests := []struct {
		name    string
		crash   protocol.Type // the journal ends with this event
		runs    int32         // runs of the restored handler
		outcome protocol.Code // "" for ok
	}{
		{name: "decided, not dispatched", crash: protocol.TypeApprovalDecided, runs: 1},
		{name: "dispatched", crash: protocol.TypeCapabilityInvoked, runs: 0, outcome: protocol.CodeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &memJournal{}
			s := session.New("restart", &session.Options{Journal: j})
			countingCap(t, s, "fs.delete")
			sub := watch(t, s)
			id, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
			if perr != nil {
				t.Fatal(perr)
			}
			req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			frame := fmt.Sprintf(`{"type":"capability_approve","callId":%q,"decision":"approved","decidedBy":"ada","inputDigest":%q}`, id, req.InputDigest)
			if r := s.HandleFrame(session.Client, decodeFrame(t, "a", frame)); r.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("approve: %s", jsonOf(t, r.Msg))
			}
			waitFor(t, sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
			events := crashAt(t, j.events(t), tt.crash)

			var ran *atomic.Int32
			r, err := session.Restore("restart", events, &session.Options{Journal: &memJournal{}}, func(r *session.Session) error {
				ran, _ = countingCap(t, r, "fs.delete")
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sub2 := r.Subscribe(uint64(len(events)))
			defer sub2.Close()
			o, _ := waitFor(t, sub2, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
			if tt.outcome == "" {
				wantValue(t, o.Outcome, `{"done":true}`)
			} else {
				wantCode(t, o.Outcome, tt.outcome)
			}
			// The replayed frame, after the restart.
			if rep := r.HandleFrame(session.Client, decodeFrame(t, "again", frame)); rep.Msg.MessageType() != protocol.TypeError {
				t.Errorf("a replayed decision after the restart: %s", jsonOf(t, rep.Msg))
			}
			tr := trail(allEvents(t, r), id)
			if n := slices.Index(tr, protocol.TypeApprovalRequested); n >= 0 && slices.Contains(tr[n+1:], protocol.TypeApprovalRequested) {
				t.Errorf("approval asked for again after the restart: %v", tr)
			}
			if got := ran.Load(); got != tt.runs {
				t.Errorf("the restored handler ran %d times, want %d", got, tt.runs)
			}
		})
	}
}

// TestApprovalWithdrawnOnReregistration: replacing a capability with
// another definition while a call awaits approval withdraws the request
// and issues a new one; a decision on the old one is refused. An unchanged
// re-registration changes nothing.
func TestApprovalWithdrawnOnReregistration(t *testing.T) {
	base := clientCap("ui.delete")
	base.RequiresApproval = true
	tests := []struct {
		name    string
		change  func(c *protocol.Capability)
		reissue bool          // a new request follows
		ends    protocol.Code // else the call ends with this
	}{
		{name: "description", change: func(c *protocol.Capability) { c.Description = "Deletes everything." }, reissue: true},
		{name: "schema still fits", change: func(c *protocol.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
		}, reissue: true},
		{name: "schema refuses the input", change: func(c *protocol.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","required":["path"]}`)
		}, ends: protocol.CodeInvalidInput},
		{name: "approval dropped", change: func(c *protocol.Capability) { c.RequiresApproval = false }, ends: protocol.CodeStaleApproval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("rereg", &session.Options{Observe: func(session.CallEvent) {}}) // Observe reads the call while it is rebound
			if err := s.Register(session.Client, base); err != nil {
				t.Fatal(err)
			}
			sub := watch(t, s)
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "ui.delete", textInput) }()
			old, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)

			seq := s.LastSeq()
			if err := s.Register(session.Client, base); err != nil { // unchanged
				t.Fatal(err)
			}
			if s.LastSeq() != seq || digestOf(s, old.CallID) != old.InputDigest {
				t.Fatal("an unchanged re-registration emitted or changed something")
			}
			changed := base
			tt.change(&changed)
			if err := s.Register(session.Client, changed); err != nil {
				t.Fatal(err)
			}
			w, _ := waitFor[*protocol.ApprovalWithdrawn](t, sub, nil)
			if w.CallID != old.CallID || w.InputDigest != old.InputDigest || w.Code != protocol.CodeStaleApproval {
				t.Fatalf("approval_withdrawn %s", jsonOf(t, w))
			}
			if !tt.reissue {
				wantCode(t, recv(t, done, "outcome"), tt.ends)
				return
			}
			fresh, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			if fresh.CallID != old.CallID || fresh.InputDigest == old.InputDigest || fresh.Revision == old.Revision {
				t.Fatalf("new request %s after %s", jsonOf(t, fresh), jsonOf(t, old))
			}
			wantErrCode(t, s.Approve(session.Client, approvalOf(old, protocol.DecisionApproved, "ada")), protocol.CodeStaleApproval)
			// A decision without a digest cannot say which request it
			// answers once there were two.
			seed := &protocol.CapabilityApprove{CallID: old.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada"}
			wantErrCode(t, s.Approve(session.Client, seed), protocol.CodeStaleApproval)
			if err := s.Approve(session.Client, approvalOf(fresh, protocol.DecisionApproved, "ada")); err != nil {
				t.Fatal(err)
			}
			inv, _ := waitFor[*protocol.CapabilityInvoked](t, sub, nil)
			if err := s.Result(session.Client, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if out := recv(t, done, "outcome"); !out.IsOK() {
				t.Fatalf("outcome %+v", out.Err)
			}
		})
	}
}

// TestApprovalDeciders: who may decide. The invoker (llm, the runtime),
// apps and environments never approve; the runtime may reject.
func TestApprovalDeciders(t *testing.T) {
	tests := []struct {
		peer     session.Peer
		decision protocol.Decision
		ok       bool
	}{
		{session.Client, protocol.DecisionApproved, true},
		{session.Operator("ops"), protocol.DecisionApproved, true},
		{session.Operator("ops"), protocol.DecisionRejected, true},
		{session.Runtime, protocol.DecisionRejected, true},
		{session.Runtime, protocol.DecisionApproved, false},
		{session.App("files"), protocol.DecisionApproved, false},
		{session.App("files"), protocol.DecisionRejected, false},
		{session.Environment, protocol.DecisionApproved, false},
		{session.Peer{Side: "mcp"}, protocol.DecisionApproved, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s", tt.peer, tt.decision), func(t *testing.T) {
			s := session.New("who", nil)
			ran, _ := countingCap(t, s, "fs.delete")
			sub := watch(t, s)
			id, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
			if perr != nil {
				t.Fatal(perr)
			}
			req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			err := s.Approve(tt.peer, approvalOf(req, tt.decision, "ada"))
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				o, _ := waitFor(t, sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
				if (tt.decision == protocol.DecisionApproved) != o.Outcome.IsOK() {
					t.Fatalf("outcome %s", jsonOf(t, o.Outcome))
				}
				return
			}
			wantErrCode(t, err, protocol.CodeForbidden)
			if !strings.Contains(err.Error(), tt.peer.String()) {
				t.Errorf("error %q does not name %s", err, tt.peer)
			}
			if ran.Load() != 0 || digestOf(s, id) == "" {
				t.Fatal("a forbidden decision had an effect")
			}
			_ = s.Cancel(id, "")
		})
	}
}

// TestApprovalRacingCallerGone: an approval that arrives just after the
// caller went away — whether or not the waiting call has noticed yet — never
// runs the call for nobody.
func TestApprovalRacingCallerGone(t *testing.T) {
	s := session.New("race", nil)
	ran, _ := countingCap(t, s, "fs.delete")
	sub := watch(t, s)
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "fs.delete", textInput) }()
		req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
		cancel()
		_ = s.Approve(session.Client, approvalOf(req, protocol.DecisionApproved, "ada"))
		out := recv(t, done, "outcome")
		wantCode(t, out, protocol.CodeCancelled)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for callers that had gone", n)
	}
}

// TestSeedShapedApproval: capability_approve exactly as the seed defines
// it (callId, decision, feedback?, decidedBy: no inputDigest) approves a
// call whose request was never re-issued — also after a restart — and is
// refused with invalid_request when the session requires the digest.
func TestSeedShapedApproval(t *testing.T) {
	seedFrame := func(id string) *protocol.Frame {
		f, err := protocol.DecodePeerFrame([]byte(`{"v":2,"id":"a1","msg":{"type":"capability_approve","callId":"` + id + `","decision":"approved","feedback":"ok","decidedBy":"ada"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Run("accepted", func(t *testing.T) {
		s := session.New("seed", nil)
		ran, _ := countingCap(t, s, "fs.delete")
		sub := watch(t, s)
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput) }()
		req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
		if r := s.HandleFrame(session.Client, seedFrame(req.CallID)); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatalf("reply %s", jsonOf(t, r.Msg))
		}
		if out := recv(t, done, "outcome"); !out.IsOK() || ran.Load() != 1 {
			t.Fatalf("outcome %+v, ran %d", out.Err, ran.Load())
		}
	})
	t.Run("required digest", func(t *testing.T) {
		s := session.New("seed", &session.Options{RequireApprovalDigest: true})
		ran, _ := countingCap(t, s, "fs.delete")
		sub := watch(t, s)
		id, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
		if perr != nil {
			t.Fatal(perr)
		}
		waitFor[*protocol.ApprovalRequested](t, sub, nil)
		r := s.HandleFrame(session.Client, seedFrame(id))
		if e, ok := r.Msg.(*protocol.ErrorReply); !ok || e.Code != protocol.CodeInvalidRequest || !strings.Contains(e.Message, "require_digest") {
			t.Fatalf("reply %s, want invalid_request naming approvals.require_digest", jsonOf(t, r.Msg))
		}
		if ran.Load() != 0 {
			t.Fatal("ran without an accepted approval")
		}
	})
}

// TestSeedShapedApprovalAfterReissueAndRestart: a call whose request was
// withdrawn and issued again still needs the digest after the session is
// restored from its journal.
func TestSeedShapedApprovalAfterReissueAndRestart(t *testing.T) {
	base := clientCap("ui.delete")
	base.RequiresApproval = true
	j := &memJournal{}
	s := session.New("reissued", &session.Options{Journal: j})
	if err := s.Register(session.Client, base); err != nil {
		t.Fatal(err)
	}
	sub := watch(t, s)
	id, perr := s.Start(protocol.AudienceLLM, "ui.delete", textInput)
	if perr != nil {
		t.Fatal(perr)
	}
	waitFor[*protocol.ApprovalRequested](t, sub, nil)
	changed := base
	changed.Description = "Deletes everything."
	if err := s.Register(session.Client, changed); err != nil {
		t.Fatal(err)
	}
	fresh, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)

	r, err := session.Restore("reissued", j.events(t), &session.Options{Journal: &memJournal{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seed := &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionApproved, DecidedBy: "ada"}
	wantErrCode(t, r.Approve(session.Client, seed), protocol.CodeStaleApproval)
	if err := r.Approve(session.Client, approvalOf(fresh, protocol.DecisionApproved, "ada")); err != nil {
		t.Fatalf("the digest of the latest request: %v", err)
	}
}

// TestCallerGoneAcrossARestart: a call awaiting approval is still pending
// and decidable after the session is restored. One its caller waited for
// in the kernel (Invoke: an MCP request, the model loop) ends cancelled
// once approved, without running — its caller went with the kernel that
// stopped (the red team saw such a call run on the new owner with nobody
// to receive the result); a detached one (Start: a user's invocation,
// whose outcome is an event) runs.
func TestCallerGoneAcrossARestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		invoke  func(t *testing.T, s *session.Session) string
		outcome protocol.Code // "" for a run
	}{
		{"invoked: the caller waited in the kernel", func(t *testing.T, s *session.Session) string {
			sub := watch(t, s)
			go s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", textInput)
			req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
			return req.CallID
		}, protocol.CodeCancelled},
		{"started: the outcome is an event", func(t *testing.T, s *session.Session) string {
			id, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
			if perr != nil {
				t.Fatal(perr)
			}
			return id
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &memJournal{}
			s := session.New("gone", &session.Options{Journal: j})
			countingCap(t, s, "fs.delete")
			sub := watch(t, s)
			id := tc.invoke(t, s)
			waitFor(t, sub, func(r *protocol.ApprovalRequested) bool { return r.CallID == id })

			var ran *atomic.Int32
			r, err := session.Restore("gone", j.events(t), &session.Options{Journal: &memJournal{}}, func(r *session.Session) error {
				ran, _ = countingCap(t, r, "fs.delete")
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			rsub := watch(t, r)
			if err := r.Approve(session.Client, &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionApproved, DecidedBy: "ada"}); err != nil {
				t.Fatalf("the restored request is not decidable: %v", err)
			}
			o, _ := waitFor(t, rsub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
			switch {
			case tc.outcome == "" && (!o.Outcome.IsOK() || ran.Load() != 1):
				t.Fatalf("outcome %+v, runs %d, want a run", o.Outcome, ran.Load())
			case tc.outcome != "" && (o.Outcome.Err == nil || o.Outcome.Err.Code != tc.outcome || ran.Load() != 0):
				t.Fatalf("outcome %+v, runs %d, want %s without a run", o.Outcome, ran.Load(), tc.outcome)
			}
		})
	}
}
