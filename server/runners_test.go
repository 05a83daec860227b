package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// TestSessionsShareCallRunners: the calls of many sessions, one after
// another, run on the manager's shared runners — one goroutine, reused —
// not a goroutine of each session's own.
func TestSessionsShareCallRunners(t *testing.T) {
	mgr := server.NewManager(server.ManagerOptions{})
	echo := session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })
	for i := range 20 {
		s, release, err := mgr.Acquire(context.Background(), fmt.Sprint("runners-", i))
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		c := protocol.Capability{Name: "agent.echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`),
			Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}, Audience: []protocol.Audience{protocol.AudienceLLM}}
		if err := s.RegisterAgent(c, echo); err != nil {
			t.Fatal(err)
		}
		if out := s.Invoke(context.Background(), protocol.AudienceLLM, "agent.echo", json.RawMessage(`{}`)); !out.IsOK() {
			t.Fatalf("session %d: %+v", i, out.Err)
		}
	}
	// A runner goes idle just after the outcome it delivered: the one
	// that ran the last call may still be on its way there.
	deadline := time.Now().Add(10 * time.Second)
	for mgr.IdleRunners() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no shared runner went idle after the calls")
		}
		runtime.Gosched()
	}
	// Usually one runner ran all twenty calls; a second starts when a
	// call comes while the last runner is still on its way back, which a
	// loaded machine makes likelier. A goroutine per session would leave
	// twenty (or, exited, none).
	if n := mgr.IdleRunners(); n > 10 {
		t.Fatalf("%d idle runners after 20 sessions' calls in turn, want a few (shared and reused)", n)
	}
}
