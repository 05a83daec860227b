package session_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestEventOwnerIsTheCallsOwner (issue 9, finding 2): every call event
// names the party that owned the capability when the call was made — live,
// in a replay, and after a restore from the journal — not the party that
// holds the name later.
func TestEventOwnerIsTheCallsOwner(t *testing.T) {
	a, b := session.App("a"), session.App("b")
	j := &memJournal{}
	s := session.New("owner", &session.Options{Journal: j})
	if err := s.Register(a, appCap("a", "shared.tool")); err != nil {
		t.Fatal(err)
	}
	live := watch(t, s)
	answer := func(s *session.Session, p session.Peer, sub *session.Subscription, result string) string {
		inv, _ := waitFor[*protocol.CapabilityInvoked](t, sub, nil)
		if err := s.Result(p, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(result)}); err != nil {
			t.Fatal(err)
		}
		return inv.CallID
	}
	done := make(chan protocol.Outcome, 1)
	go func() {
		done <- s.Invoke(context.Background(), protocol.AudienceLLM, "shared.tool", json.RawMessage(`{"text":"secret"}`))
	}()
	aCall := answer(s, a, live, `"a's secret"`)
	recv(t, done, "a's outcome")
	if err := s.Deregister(a, "shared.tool"); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(b, appCap("b", "shared.tool")); err != nil {
		t.Fatal(err)
	}
	go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "shared.tool", textInput) }()
	bCall := answer(s, b, live, `"b's"`)
	recv(t, done, "b's outcome")

	check := func(t *testing.T, evs []session.Event) {
		t.Helper()
		seen := map[string]int{}
		for _, ev := range evs {
			id := protocol.CallIDOf(ev.Msg)
			if id == "" {
				if ev.Owner != (session.Peer{}) {
					t.Errorf("%s has owner %v", ev.Msg.MessageType(), ev.Owner)
				}
				continue
			}
			want := map[string]session.Peer{aCall: a, bCall: b}[id]
			if !ev.Owner.Same(want) {
				t.Errorf("%s of call %s: owner %v, want %v", ev.Msg.MessageType(), id, ev.Owner, want)
			}
			seen[id]++
		}
		if seen[aCall] != 2 || seen[bCall] != 2 { // capability_invoked, capability_outcome
			t.Errorf("call events seen %v", seen)
		}
	}
	t.Run("replay", func(t *testing.T) { check(t, allEvents(t, s)) })
	t.Run("after a restore", func(t *testing.T) {
		r, err := session.Restore("owner", j.events(t), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, allEvents(t, r))
		if owner, _ := r.Owner("shared.tool"); !owner.Same(b) {
			t.Fatalf("restored owner of the name %v, want b", owner)
		}
	})
}
