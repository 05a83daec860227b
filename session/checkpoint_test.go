package session

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// randomJournal returns n events as a journal could hold them, drawn
// from every kind a restore reads: registrations of four names by
// several origins (some requiring approval, some fire-and-forget),
// deregistrations, every call event of calls under three id prefixes
// (approvals asked, decided both ways and withdrawn, render streams,
// outcomes of every kind, in orders a well-behaved kernel would not
// write too), turns, conversation messages and streamed text. ids are
// the call ids it used.
func randomJournal(rng *rand.Rand, n int) (events []Event, ids []string) {
	names := []string{"a", "b", "c", "d"}
	origins := []protocol.Origin{{Kind: protocol.OriginClient}, {Kind: protocol.OriginApp, ID: "x"}, {Kind: protocol.OriginApp, ID: "y"}, {Kind: protocol.OriginAgent}, {Kind: protocol.OriginFramework}}
	prefixes := []string{"cold1-", "cold2-", "cnew3-"}
	codes := []protocol.Code{protocol.CodeRejected, protocol.CodeTimeout, protocol.CodeUnavailable, protocol.Code("peer_code")}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	turn := 0
	for len(events) < n {
		var m protocol.Message
		id := func() string {
			if len(ids) > 0 && rng.IntN(3) > 0 {
				return ids[rng.IntN(len(ids))]
			}
			id := fmt.Sprintf("%s%x", pick(prefixes), len(ids)+1)
			ids = append(ids, id)
			return id
		}
		switch k := rng.IntN(20); {
		case k < 2:
			var caps []protocol.Capability
			for range 1 + rng.IntN(2) {
				o := origins[rng.IntN(len(origins))]
				side := protocol.SideClient
				if o.Kind == protocol.OriginAgent || o.Kind == protocol.OriginFramework {
					side = protocol.SideAgent
				}
				caps = append(caps, protocol.Capability{Name: pick(names), Description: fmt.Sprintf("v%d", rng.IntN(3)),
					InputSchema: json.RawMessage(`{"type":"object"}`), Side: side, Origin: o,
					RequiresApproval: rng.IntN(2) == 0, FireAndForget: rng.IntN(3) == 0})
			}
			m = &protocol.CapabilityRegister{Capabilities: caps}
		case k < 3:
			m = &protocol.CapabilityDeregister{Names: []string{pick(names)}}
		case k < 5:
			m = &protocol.ApprovalRequested{CallID: id(), Name: pick(names), Input: json.RawMessage(`{"n":1}`),
				Invoker: []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}[rng.IntN(2)], Detached: rng.IntN(2) == 0}
		case k < 6:
			d := protocol.DecisionApproved
			if rng.IntN(2) == 0 {
				d = protocol.DecisionRejected
			}
			m = &protocol.ApprovalDecided{CallID: id(), Name: pick(names), Decision: d, DecidedBy: "ada"}
		case k < 7:
			m = &protocol.ApprovalWithdrawn{CallID: id(), Name: pick(names)}
		case k < 10:
			m = &protocol.CapabilityInvoked{CallID: id(), Name: pick(names), Input: json.RawMessage(`{"n":2}`)}
		case k < 11:
			m = &protocol.RenderInvoked{CallID: id(), CapabilityName: pick(names), Props: json.RawMessage(`{"p":1}`), Partial: rng.IntN(3) > 0}
		case k < 14:
			out := protocol.OK(json.RawMessage(`"done"`))
			if rng.IntN(3) == 0 {
				out = protocol.Fail(codes[rng.IntN(len(codes))], "no")
			}
			m = &protocol.CapabilityOutcome{CallID: id(), Name: pick(names), Outcome: out}
		case k < 15:
			turn += rng.IntN(2)
			m = &protocol.TurnStarted{Turn: turn, StartedBy: "client"}
		case k < 16:
			m = &protocol.TurnEnded{Turn: turn, Reason: protocol.TurnCompleted}
		case k < 18:
			m = &protocol.ConversationMessage{Turn: turn, Message: protocol.ChatMessage{Role: protocol.RoleUser, Text: fmt.Sprintf("m%d", len(events))}}
		default:
			m = &protocol.AssistantDelta{Turn: turn, Text: "…"}
		}
		events = append(events, Event{Seq: uint64(len(events) + 1), Msg: m})
	}
	return events, ids
}

// replayOpts are the options of the sessions the checkpoint tests
// restore: keep events in memory, a history to read the rest from.
func replayOpts(keep int) *Options {
	return &Options{LogMemory: keep, History: noHistory{}, FinishedMemory: 16}
}

type noHistory struct{}

func (noHistory) ReadEvents(context.Context, uint64, uint64) ([]Event, error) { return nil, nil }

// replayed returns what a restore builds from events, as replay leaves it
// before resuming anything, written out: the log (its range and the
// events in memory with their owners), the registry, the revisions, the
// pending calls, the open streams, how each of ids ended, and the turns.
func replayed(t *testing.T, cp *Checkpoint, events []Event, keep int, ids []string) string {
	t.Helper()
	s := New("s", replayOpts(keep))
	r := newReplay(s)
	if cp != nil {
		if err := r.checkpoint(cp); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		r.apply(e, true)
	}
	digest := r.digest() // the registry, revisions, pending calls, streams and turns
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	j := func(v any) string { out, _ := json.Marshal(v); return string(out) }
	l := &s.events
	fmt.Fprintf(&b, "log: last %d, oldest %d, in memory from %d\n", l.last, l.oldest(), l.inMemory())
	for seq := l.inMemory(); seq <= l.last && seq > 0; seq++ {
		e := l.at(seq)
		fmt.Fprintf(&b, "  %d %s %s owner %s\n", e.seq, e.typ, j(e.msg), j(e.owner))
	}
	for _, id := range ids {
		how, ok := s.finishedHow(id)
		code, _ := s.finishedCode(id)
		owner, ff := s.fireAndForgetOwner(code)
		fmt.Fprintf(&b, "finished %s: %v %q ff %v %v\n", id, ok, how, ff, owner)
	}
	b.WriteString(digest)
	return b.String()
}

// TestCheckpointRestoresAsTheEvents holds a checkpoint to its promise:
// restoring from Compact's checkpoint of a journal's first events and
// the events after it builds what restoring from all of them builds —
// for random journals of every event kind, checkpoints cut anywhere,
// checkpoints of checkpoints, and logs kept shorter and longer than the
// checkpoint's latest events.
func TestCheckpointRestoresAsTheEvents(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		events, ids := randomJournal(rng, 1+rng.IntN(200))
		keep := 1 + rng.IntN(40)
		want := replayed(t, nil, events, keep, ids)
		k := rng.IntN(len(events) + 1)
		if k == 0 {
			k = 1
		}
		cp, err := Compact(nil, events[:k], replayOpts(keep))
		if err != nil {
			t.Fatalf("seed %d: compact %d events: %v", seed, k, err)
		}
		if got := replayed(t, cp, events[k:], keep, ids); got != want {
			t.Fatalf("seed %d: restored from a checkpoint of %d of %d events (keeping %d):\n%s\nwant, from the events:\n%s", seed, k, len(events), keep, got, want)
		}
		if k == len(events) {
			continue
		}
		m := k + 1 + rng.IntN(len(events)-k)
		cp2, err := Compact(cp, events[k:m], replayOpts(keep))
		if err != nil {
			t.Fatalf("seed %d: compact again: %v", seed, err)
		}
		if got := replayed(t, cp2, events[m:], keep, ids); got != want {
			t.Fatalf("seed %d: restored from a checkpoint of a checkpoint (%d, then to %d of %d):\n%s\nwant:\n%s", seed, k, m, len(events), got, want)
		}
		if len(cp2.State)+len(cp2.Latest) > m {
			t.Fatalf("seed %d: the checkpoint holds %d events of %d", seed, len(cp2.State)+len(cp2.Latest), m)
		}
	}
}

// TestCheckpointLeavesFinishedCallsOut: a session of a thousand finished
// calls checkpoints to its latest events and the finished calls' ids.
func TestCheckpointLeavesFinishedCallsOut(t *testing.T) {
	var events []Event
	events = append(events, Event{Seq: 1, Msg: &protocol.CapabilityRegister{Capabilities: []protocol.Capability{{Name: "a", Description: "d",
		InputSchema: json.RawMessage(`{"type":"object"}`), Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}}}}})
	for i := range 500 {
		id := fmt.Sprintf("cold1-%x", i+1)
		events = append(events,
			Event{Seq: uint64(len(events) + 1), Msg: &protocol.CapabilityInvoked{CallID: id, Name: "a", Input: json.RawMessage(`{}`)}},
			Event{Seq: uint64(len(events) + 2), Msg: &protocol.CapabilityOutcome{CallID: id, Name: "a", Outcome: protocol.OK(json.RawMessage(`1`))}})
	}
	cp, err := Compact(nil, events, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.State) != 1 || len(cp.Latest) != 32 || len(cp.Finished.Calls) != 484 {
		t.Fatalf("checkpoint: %d state events, %d latest, %d finished calls; want the registration, 32 and 484", len(cp.State), len(cp.Latest), len(cp.Finished.Calls))
	}
	if cp.First != 1 || cp.Seq != 1001 {
		t.Fatalf("checkpoint covers %d to %d, want 1 to 1001", cp.First, cp.Seq)
	}
}

// TestCheckpointThatDoesNotHoldTogether: a checkpoint read from a store
// may be anything; restoring from a broken one is an error naming what
// is wrong.
func TestCheckpointThatDoesNotHoldTogether(t *testing.T) {
	reg := &protocol.CapabilityDeregister{Names: []string{"x"}}
	for _, c := range []struct {
		name string
		cp   Checkpoint
		want string
	}{
		{"no latest", Checkpoint{First: 1, Seq: 1}, "no latest events"},
		{"first 0", Checkpoint{Seq: 1, Latest: []Event{{Seq: 1, Msg: reg}}}, "first event's seq is 0"},
		{"state after latest", Checkpoint{First: 1, Seq: 2, State: []Event{{Seq: 3, Msg: reg}}, Latest: []Event{{Seq: 2, Msg: reg}}}, "latest event 0 has seq 2 after 3"},
		{"gap in latest", Checkpoint{First: 1, Seq: 4, Latest: []Event{{Seq: 2, Msg: reg}, {Seq: 4, Msg: reg}}}, "latest event 1 has seq 4 after 2"},
		{"seq not the last", Checkpoint{First: 1, Seq: 9, Latest: []Event{{Seq: 2, Msg: reg}}}, "not its seq 9"},
		{"no message", Checkpoint{First: 1, Seq: 1, Latest: []Event{{Seq: 1}}}, "latest event 0"},
		{"call past the tables", Checkpoint{First: 1, Seq: 1, Latest: []Event{{Seq: 1, Msg: reg}},
			Finished: FinishedCalls{Codes: []protocol.Code{""}, Calls: []uint64{uint64(newFinishedCall(1, 5, 0))}}}, "names no entry"},
		{"code past the tables", Checkpoint{First: 1, Seq: 1, Latest: []Event{{Seq: 1, Msg: reg}},
			Finished: FinishedCalls{Codes: []protocol.Code{""}, Calls: []uint64{uint64(newFinishedCall(1, 0, 3))}}}, "names no entry"},
		{"first code not a value's", Checkpoint{First: 1, Seq: 1, Latest: []Event{{Seq: 1, Msg: reg}},
			Finished: FinishedCalls{Codes: []protocol.Code{"rejected"}, Calls: []uint64{uint64(newFinishedCall(1, 0, 0))}}}, "first code"},
	} {
		_, err := RestoreFrom("s", &c.cp, nil, nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	// The events after a checkpoint continue it.
	cp := &Checkpoint{First: 1, Seq: 1, Latest: []Event{{Seq: 1, Msg: reg}}}
	if _, err := RestoreFrom("s", cp, []Event{{Seq: 3, Msg: reg}}, nil, nil); err == nil || !strings.Contains(err.Error(), "seq 3 after 1") {
		t.Errorf("events after a gap: %v", err)
	}
	if _, err := Compact(cp, []Event{{Seq: 1, Msg: reg}}, nil); err == nil || !strings.Contains(err.Error(), "seq 1 after 1") {
		t.Errorf("compact events that do not continue: %v", err)
	}
}

// TestCheckpointKeepsTheRegistrationsThatMatter: a session that
// registers a tool for each turn and drops it after keeps, in its
// checkpoint, the registrations still in place and those a pending call
// reads — not one per turn (a probe's checkpoint grew past 1 MiB so,
// and was never written again).
func TestCheckpointKeepsTheRegistrationsThatMatter(t *testing.T) {
	reg := func(name, desc string) *protocol.CapabilityRegister {
		return &protocol.CapabilityRegister{Capabilities: []protocol.Capability{{Name: name, Description: desc,
			InputSchema: json.RawMessage(`{"type":"object"}`), Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}, RequiresApproval: true}}}
	}
	var events []Event
	add := func(m protocol.Message) { events = append(events, Event{Seq: uint64(len(events) + 1), Msg: m}) }
	add(reg("ui.show", "shown"))
	for turn := 1; turn <= 200; turn++ {
		add(&protocol.TurnStarted{Turn: turn, StartedBy: "client"})
		add(reg("turn.tool", fmt.Sprintf("for turn %d", turn)))
		if turn == 100 { // asked in turn 100, still pending: it read that turn's definition
			add(&protocol.ApprovalRequested{CallID: "cold1-1", Name: "turn.tool", Input: json.RawMessage(`{}`), Invoker: protocol.AudienceLLM})
		}
		add(&protocol.CapabilityDeregister{Names: []string{"turn.tool"}})
		add(&protocol.TurnEnded{Turn: turn, Reason: protocol.TurnCompleted})
	}
	cp, err := Compact(nil, events, replayOpts(32))
	if err != nil {
		t.Fatal(err)
	}
	registrations := 0
	for _, e := range cp.State {
		switch e.Msg.(type) {
		case *protocol.CapabilityRegister, *protocol.CapabilityDeregister:
			registrations++
		}
	}
	if registrations != 3 { // ui.show; turn 100's tool, and its deregistration
		t.Fatalf("the checkpoint keeps %d registrations and deregistrations of %d", registrations, 400)
	}
	if got, want := replayed(t, cp, nil, 32, []string{"cold1-1"}), replayed(t, nil, events, 32, []string{"cold1-1"}); got != want {
		t.Fatalf("restored from the checkpoint:\n%s\nwant:\n%s", got, want)
	}
}
