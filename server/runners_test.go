package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
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

// TestIdlePeersFrameReadOnASharedReader: a frame from a peer that had been
// idle is read and applied on one of the server's shared frame readers,
// and answered like any other.
func TestIdlePeersFrameReadOnASharedReader(t *testing.T) {
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(server.ManagerOptions{})
	srv := server.New(server.Options{Tokens: tokens, Manager: mgr})
	ts := httptest.NewServer(srv) // listens on 127.0.0.1
	t.Cleanup(ts.Close)
	f := &fixture{t: t, srv: ts, mgr: mgr}
	c := f.dial(clientToken, "hand-off", "")
	c.send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.one", false)}})
	c.reply("r1")
	time.Sleep(20 * time.Millisecond) // the peer idles (ten times idleWait): the condition under test, not a wait for anything
	c.send("r2", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.two", false)}})
	if r := c.reply("r2"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("reply %s, want an ack", r.Msg.MessageType())
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.IdleFrameReaders() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no shared frame reader ran the idle peer's frame")
		}
		runtime.Gosched() // the reader that ran it is on its way back to idle
	}
}
