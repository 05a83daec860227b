package session_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestOptionsGoRunsStartedCalls: with Options.Go, a call started with
// Start runs on what Go starts — one each — and its outcome arrives as
// without it; a handler's call too.
func TestOptionsGoRunsStartedCalls(t *testing.T) {
	var ran atomic.Int64
	s := session.New("go-option", &session.Options{Go: func(f func()) {
		ran.Add(1)
		go f()
	}})
	ui, agent := clientCap("ui.echo"), agentCap("agent.echo")
	ui.Audience = []protocol.Audience{protocol.AudienceUser}
	agent.Audience = []protocol.Audience{protocol.AudienceUser}
	if err := s.Register(session.Client, ui); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterAgent(agent, echo); err != nil {
		t.Fatal(err)
	}
	answer(t, s, session.Client, "ui.echo", func(inv *protocol.CapabilityInvoked) json.RawMessage { return inv.Input })
	sub := watch(t, s)
	for i, name := range []string{"ui.echo", "agent.echo"} {
		id, perr := s.Start(protocol.AudienceUser, name, json.RawMessage(`{"text":"hi"}`))
		if perr != nil {
			t.Fatalf("start %s: %v", name, perr)
		}
		out, _ := waitFor(t, sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
		if out.Outcome.Err != nil || string(out.Outcome.Value) != `{"text":"hi"}` {
			t.Fatalf("%s: outcome %+v, want its input back", name, out.Outcome)
		}
		// The client's call runs once through Go; the handler's call runs
		// there and so does its handler.
		if want := int64(1 + 2*i); ran.Load() != want {
			t.Fatalf("after %s: %d goroutines started through Go, want %d", name, ran.Load(), want)
		}
	}
}
