package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
)

// waitWriters waits until no connection writer runs, failing after
// limit.
func waitWriters(t *testing.T, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); server.RunningWriters() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connection writers still run after %s idle", server.RunningWriters(), limit)
		}
		time.Sleep(20 * time.Millisecond) // polling a count, bounded
	}
}

// TestIdleConnectionKeepsNoWriter: a connection with nothing to write
// ends its writer goroutine within a couple of seconds (an idle client
// holds one goroutine, its reader), and the next event — a call to the
// client's capability — and the next reply start one again: nothing
// waits for a writer that is not there.
func TestIdleConnectionKeepsNoWriter(t *testing.T) {
	server.SetIdleTick(t, 20*time.Millisecond)
	f := newFixture(t, nil)
	c := f.dial(clientToken, "s1", "?after=0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.ctx = ctx // the reads below outlast the dial's ten seconds
	c.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.echo", false)}})
	if r := c.reply("r"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("register: %+v", r.Msg)
	}
	s, release, err := f.mgr.Acquire(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// The writer ends after one idle tick and before two; a loaded machine
	// gets much more.
	const limit = 20 * time.Second

	for round := range 2 {
		waitWriters(t, limit)
		// An event: a call made while no writer runs reaches the client.
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "ui.echo", json.RawMessage(`{"n":1}`)) }()
		inv := c.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
		waitWriters(t, limit)
		// A reply: the result's ack comes back with no writer running
		// before it, and the outcome reaches the invoker.
		c.send("res", &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{"round":1}`)})
		if r := c.reply("res"); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatalf("round %d: result: %+v", round, r.Msg)
		}
		select {
		case out := <-done:
			if out.Err != nil || string(out.Value) != `{"round":1}` {
				t.Fatalf("round %d: outcome %+v", round, out)
			}
		case <-ctx.Done():
			t.Fatalf("round %d: no outcome", round)
		}
	}
}
