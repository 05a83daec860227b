package session_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// A snapshot subscription is the state as of the moment it is made: a call
// that starts and ends afterwards arrives as events, its outcome included,
// even when the subscriber reads nothing until the call is over.
func TestSubscribeSnapshotIsTakenAtOnce(t *testing.T) {
	s := session.New("snap", nil)
	echo := protocol.Capability{
		Name:        "t.echo",
		Description: "Echo.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Side:        protocol.SideAgent,
		Origin:      protocol.Origin{Kind: protocol.OriginAgent},
	}
	if err := s.RegisterAgent(echo, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		return c.Input, nil
	})); err != nil {
		t.Fatal(err)
	}
	before := s.LastSeq()
	sub := s.SubscribeSnapshot()
	defer sub.Close()
	if out := s.Invoke(context.Background(), protocol.AudienceLLM, "t.echo", json.RawMessage(`{"x":1}`)); out.Err != nil {
		t.Fatalf("invoke: %v", out.Err)
	}

	ev, ok, _, err := sub.TryNext()
	if err != nil || !ok {
		t.Fatalf("first TryNext = ok %v, err %v; want the snapshot", ok, err)
	}
	snap, isSnap := ev.Msg.(*protocol.Snapshot)
	if !isSnap || ev.Seq != before || snap.Seq != before {
		t.Fatalf("first event = seq %d %T; want the snapshot at seq %d", ev.Seq, ev.Msg, before)
	}
	var sawOutcome bool
	for {
		ev, ok, _, err := sub.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if _, isSnap := ev.Msg.(*protocol.Snapshot); isSnap {
			t.Fatalf("a second snapshot at seq %d", ev.Seq)
		}
		if o, isOutcome := ev.Msg.(*protocol.CapabilityOutcome); isOutcome && o.Name == "t.echo" {
			sawOutcome = true
		}
	}
	if !sawOutcome {
		t.Fatal("the call's capability_outcome was folded away: never delivered as an event")
	}
}
