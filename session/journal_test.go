package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// memJournal keeps events in memory, encoded as frames and decoded again on
// load, as a durable journal would.
type memJournal struct {
	mu     sync.Mutex
	frames [][]byte
}

func (j *memJournal) Append(e session.Event) error {
	b, err := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.frames = append(j.frames, b)
	return nil
}

func (j *memJournal) events(t *testing.T) []session.Event {
	out, err := j.decoded()
	if err != nil {
		t.Fatalf("journal holds an undecodable frame: %v", err)
	}
	return out
}

// decoded returns the events the journal holds, decoded.
func (j *memJournal) decoded() ([]session.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []session.Event
	for _, b := range j.frames {
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			return nil, err
		}
		out = append(out, session.Event{Seq: f.Seq, Msg: f.Msg})
	}
	return out, nil
}

func jClientCap(name string, approval bool) protocol.Capability {
	return protocol.Capability{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}, RequiresApproval: approval}
}

func jAgentCap(name string, approval bool) protocol.Capability {
	return protocol.Capability{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}, RequiresApproval: approval}
}

// waitFor reads sub until it sees a message of type typ, failing after a
// few seconds.
func waitForType(t *testing.T, sub *session.Subscription, typ protocol.Type) session.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		if ev.Msg.MessageType() == typ {
			return ev
		}
	}
}

// TestRestore kills a session mid-flight (drops it) and restores it from its
// journal: registrations, a pending approval, a dispatched client call and
// the event log come back; a running agent call ends with internal.
func TestRestore(t *testing.T) {
	j := &memJournal{}
	s := session.New("s1", &session.Options{Journal: j})
	block := make(chan struct{})
	defer close(block)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Register(session.Client, jClientCap("ui.confirm", true), jClientCap("ui.show", false)))
	must(s.RegisterAgent(jAgentCap("agent.slow", false), session.HandlerFunc(func(ctx context.Context, c *session.Call) (json.RawMessage, error) {
		<-block
		return nil, nil
	})))
	must(s.RegisterAgent(jAgentCap("agent.delete", true), session.HandlerFunc(func(ctx context.Context, c *session.Call) (json.RawMessage, error) {
		return json.RawMessage(`"deleted by the old process"`), nil
	})))
	sub := s.Subscribe(0)
	approvalID, _ := s.Start(protocol.AudienceLLM, "ui.confirm", json.RawMessage(`{"n":1}`))
	waitForType(t, sub, protocol.TypeApprovalRequested)
	showID, _ := s.Start(protocol.AudienceLLM, "ui.show", json.RawMessage(`{"n":2}`))
	waitForType(t, sub, protocol.TypeCapabilityInvoked)
	slowID, _ := s.Start(protocol.AudienceLLM, "agent.slow", json.RawMessage(`{}`))
	waitForType(t, sub, protocol.TypeCapabilityInvoked)
	deleteID, _ := s.Start(protocol.AudienceLLM, "agent.delete", json.RawMessage(`{}`))
	waitForType(t, sub, protocol.TypeApprovalRequested)
	lastSeen := s.LastSeq()
	sub.Close()

	// The process dies here: only the journal survives.
	events := j.events(t)
	if uint64(len(events)) != lastSeen {
		t.Fatalf("journal has %d events, the session emitted %d", len(events), lastSeen)
	}
	j2 := &memJournal{}
	r, err := session.Restore("s1", events, &session.Options{Journal: j2}, func(r *session.Session) error {
		return r.RegisterAgent(jAgentCap("agent.delete", true), session.HandlerFunc(func(ctx context.Context, c *session.Call) (json.RawMessage, error) {
			return json.RawMessage(`"deleted after the restart"`), nil
		}))
	})
	must(err)
	for _, n := range []string{"ui.confirm", "ui.show", "agent.delete"} {
		if _, ok := r.Lookup(n); !ok {
			t.Errorf("%s was not restored", n)
		}
	}
	if _, ok := r.Lookup("agent.slow"); ok {
		t.Error("a runtime registration without its handler was restored")
	}
	// A subscriber resuming from its last seq misses nothing.
	sub2 := r.Subscribe(lastSeen)
	defer sub2.Close()
	out := waitForType(t, sub2, protocol.TypeCapabilityOutcome).Msg.(*protocol.CapabilityOutcome)
	if out.CallID != slowID || out.Outcome.IsOK() || out.Outcome.Err.Code != protocol.CodeUnavailable {
		t.Fatalf("first outcome after restore = %+v, want unavailable for the running agent call", out)
	}
	// The pending approval can still be answered, and the call then runs.
	must(r.Approve(session.Client, approveOf(r, approvalID, "ada")))
	inv := waitForType(t, sub2, protocol.TypeCapabilityInvoked).Msg.(*protocol.CapabilityInvoked)
	if inv.CallID != approvalID {
		t.Fatalf("invoked %s, want %s", inv.CallID, approvalID)
	}
	must(r.Result(session.Client, &protocol.CapabilityResult{CallID: approvalID, Result: json.RawMessage(`"confirmed"`)}))
	if o := waitForType(t, sub2, protocol.TypeCapabilityOutcome).Msg.(*protocol.CapabilityOutcome); o.CallID != approvalID || string(o.Outcome.Value) != `"confirmed"` {
		t.Fatalf("outcome = %+v", o)
	}
	// The dispatched client call can still be answered.
	must(r.Result(session.Client, &protocol.CapabilityResult{CallID: showID, Result: json.RawMessage(`"shown"`)}))
	if o := waitForType(t, sub2, protocol.TypeCapabilityOutcome).Msg.(*protocol.CapabilityOutcome); o.CallID != showID {
		t.Fatalf("outcome = %+v", o)
	}
	// The agent call awaiting approval runs its re-attached handler.
	must(r.Approve(session.Client, approveOf(r, deleteID, "ada")))
	if o := waitForType(t, sub2, protocol.TypeCapabilityOutcome).Msg.(*protocol.CapabilityOutcome); o.CallID != deleteID || string(o.Outcome.Value) != `"deleted after the restart"` {
		t.Fatalf("outcome = %+v", o)
	}
	// New events continue the seq and reach the new journal.
	if got := j2.events(t); len(got) == 0 || got[0].Seq <= lastSeen {
		t.Fatalf("new journal starts at %v", got)
	}
	if err := r.Result(session.Client, &protocol.CapabilityResult{CallID: slowID, Result: json.RawMessage(`1`)}); err == nil {
		t.Error("a result for a call finished by the restart was accepted")
	}
}

func TestRestoreRejectsGaps(t *testing.T) {
	ev := []session.Event{
		{Seq: 1, Msg: &protocol.CapabilityDeregister{Names: []string{"x"}}},
		{Seq: 3, Msg: &protocol.CapabilityDeregister{Names: []string{"y"}}},
	}
	if _, err := session.Restore("s", ev, nil, nil); err == nil {
		t.Fatal("Restore accepted a gap in the seqs")
	}
}

// TestRestoreFromLaterSeq: a journal that kept only the latest events (its
// first seq is not 1) restores, replays from its first seq, and gives a
// snapshot to a subscriber asking for what was dropped.
func TestRestoreFromLaterSeq(t *testing.T) {
	var ev []session.Event
	for i := range 10 {
		ev = append(ev, session.Event{Seq: uint64(100 + i), Msg: &protocol.CapabilityRegister{Capabilities: []protocol.Capability{jClientCap(fmt.Sprint("c.", i), false)}}})
	}
	r, err := session.Restore("s", ev, &session.Options{LogSize: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.LastSeq() != 109 || len(r.List(protocol.AudienceRuntime)) != 1 {
		t.Fatalf("last seq %d", r.LastSeq())
	}
	sub := r.Subscribe(105)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for want := uint64(106); want <= 109; want++ {
		e, err := sub.Next(ctx)
		if err != nil || e.Seq != want {
			t.Fatalf("got %d %v, want %d", e.Seq, err, want)
		}
	}
	old := r.Subscribe(50)
	defer old.Close()
	if e, _ := old.Next(ctx); e.Msg.MessageType() != protocol.TypeSnapshot || len(e.Msg.(*protocol.Snapshot).Capabilities) != 11 {
		t.Fatalf("far behind: %+v", e.Msg)
	}
	if err := r.Register(session.Client, jClientCap("c.new", false)); err != nil || r.LastSeq() != 110 {
		t.Fatalf("register after restore: %v, seq %d", err, r.LastSeq())
	}
}

// TestJournaledLogKeepsNoFinishedCall: a journaled session's log keeps
// its call events as the messages it journaled, not the calls they were
// made from — a finished call holds its invoker's context, its channels
// and its handler's copy, and a log holds thousands of events — so a
// finished call is garbage once its caller has its outcome.
func TestJournaledLogKeepsNoFinishedCall(t *testing.T) {
	s := session.New("s1", &session.Options{Journal: &memJournal{}})
	var seen weak.Pointer[session.Call]
	if err := s.RegisterAgent(jAgentCap("echo", false), session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		seen = weak.Make(c)
		return c.Input, nil
	})); err != nil {
		t.Fatal(err)
	}
	if out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", json.RawMessage(`{"n":1}`)); !out.IsOK() {
		t.Fatal(out.Err)
	}
	// The log still shows the call: its events are read as messages.
	sub := s.Subscribe(0)
	defer sub.Close()
	waitForType(t, sub, protocol.TypeCapabilityInvoked)
	if e := waitForType(t, sub, protocol.TypeCapabilityOutcome); string(e.Msg.(*protocol.CapabilityOutcome).Outcome.Value) != `{"n":1}` {
		t.Fatalf("the outcome event reads %+v", e.Msg)
	}
	// Collected within a few cycles: nothing but the log could hold it.
	for range 5 {
		runtime.GC()
		if seen.Value() == nil {
			return
		}
	}
	t.Fatal("a finished call is still reachable from its journaled session")
}

// TestInvokeAckAfterItsCallIsJournaled: the ack of a user's
// capability_invoke comes once the call's first event — capability_invoked,
// or approval_requested — is in the journal, and its seq is at or after
// it: a kill right after the ack leaves no acknowledged call that a
// restart does not know. The ack had come first (the call started on a
// goroutine of its own), and a probe's kill -9 lost 0–7 acknowledged
// calls a session.
func TestInvokeAckAfterItsCallIsJournaled(t *testing.T) {
	for _, approval := range []bool{false, true} {
		t.Run(fmt.Sprint("approval ", approval), func(t *testing.T) {
			j := &memJournal{}
			s := session.New("acked", &session.Options{Journal: j})
			c := jClientCap("ui.open", approval)
			c.Audience = []protocol.Audience{protocol.AudienceUser}
			if err := s.Register(session.Client, c); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				reply := s.HandleFrame(session.Client, &protocol.Frame{ID: fmt.Sprint("i", i), Msg: &protocol.CapabilityInvoke{Name: "ui.open", Input: json.RawMessage(`{}`)}})
				ack, ok := reply.Msg.(*protocol.Ack)
				if !ok {
					t.Fatalf("reply %+v", reply.Msg)
				}
				var first uint64
				for _, e := range j.events(t) { // what a restart would read, as the ack leaves
					if protocol.CallIDOf(e.Msg) == ack.CallID {
						first = e.Seq
						break
					}
				}
				if first == 0 || first > reply.Seq {
					t.Fatalf("call %d: its first journaled event is at seq %d (0: none), the ack's seq %d", i, first, reply.Seq)
				}
			}
		})
	}
}
