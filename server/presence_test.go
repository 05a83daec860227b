package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// TestCallToDisconnectedClient (issue 15): a call to a capability whose
// client has disconnected waits at most PeerGrace for it to reconnect over
// the WebSocket endpoint — a reconnect within it answers the call — and
// otherwise fails with unavailable naming the owner, instead of hanging
// for the call timeout.
func TestCallToDisconnectedClient(t *testing.T) {
	const grace = 300 * time.Millisecond
	newF := func(t *testing.T) *fixture {
		tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
		if err != nil {
			t.Fatal(err)
		}
		mgr := server.NewManager(server.ManagerOptions{Session: session.Options{PeerGrace: grace}})
		ts := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr}))
		t.Cleanup(ts.Close)
		return &fixture{t: t, srv: ts, mgr: mgr}
	}
	// start registers ui.show from a client, invokes it, and returns the
	// client (which got capability_invoked), the seq of that event and the
	// outcome channel.
	start := func(t *testing.T, f *fixture) (*wsClient, uint64, string, <-chan protocol.Outcome) {
		c := f.dial(clientToken, "g", "?after=0")
		c.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.show", false)}})
		c.reply("reg")
		s, release, err := f.mgr.Acquire(context.Background(), "g")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		done := make(chan protocol.Outcome, 1)
		go func() {
			done <- s.Invoke(context.Background(), protocol.AudienceLLM, "ui.show", json.RawMessage(`{"n":1}`))
		}()
		ev := c.until(ofType(protocol.TypeCapabilityInvoked))
		return c, ev.Seq, ev.Msg.(*protocol.CapabilityInvoked).CallID, done
	}
	t.Run("reconnects within the grace", func(t *testing.T) {
		f := newF(t)
		c, seq, id, done := start(t, f)
		_ = c.conn.Close(websocket.StatusGoingAway, "tab reload")
		c2 := f.dial(clientToken, "g", fmt.Sprintf("?after=%d", seq))
		c2.send("x", &protocol.CapabilityResult{CallID: id, Result: json.RawMessage(`{"shown":1}`)})
		if r := c2.reply("x"); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatalf("result after the reconnect: %+v", r.Msg)
		}
		if out := <-done; !out.IsOK() {
			t.Fatalf("outcome %+v", out.Err)
		}
	})
	t.Run("does not come back", func(t *testing.T) {
		f := newF(t)
		c, _, _, done := start(t, f)
		left := time.Now()
		_ = c.conn.Close(websocket.StatusNormalClosure, "")
		var out protocol.Outcome
		select {
		case out = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the call still hangs 30 s after its client left")
		}
		if out.IsOK() || out.Err.Code != protocol.CodeUnavailable || !strings.Contains(out.Err.Message, "client") {
			t.Fatalf("outcome %+v, want unavailable naming the client", out.Err)
		}
		if d := time.Since(left); d < grace {
			t.Errorf("failed %s after the client left, before the grace of %s", d, grace)
		}
	})
}

// TestOnlyDecidersApproveOverWebSocket: an app's capability_approve over
// its connection is forbidden and changes nothing; the client's, echoing
// the digest, decides.
func TestOnlyDecidersApproveOverWebSocket(t *testing.T) {
	f := newFixture(t, nil)
	cl := f.dial(clientToken, "d", "?after=0")
	cl.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.delete", true)}})
	cl.reply("reg")
	app := f.dial(appToken, "d", "?after=0")
	s, release, err := f.mgr.Acquire(context.Background(), "d")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	id, perr := s.Start(protocol.AudienceLLM, "ui.delete", json.RawMessage(`{"n":1}`))
	if perr != nil {
		t.Fatal(perr)
	}
	req := cl.until(ofType(protocol.TypeApprovalRequested)).Msg.(*protocol.ApprovalRequested)
	app.send("a", &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionApproved, DecidedBy: "app", InputDigest: req.InputDigest})
	if r := app.reply("a").Msg.(*protocol.ErrorReply); r.Code != protocol.CodeForbidden {
		t.Fatalf("an app's approval: %+v", r)
	}
	cl.send("a", &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: req.InputDigest})
	// The ack and the approval_decided event may arrive in either order.
	var d *protocol.ApprovalDecided
	for acked := false; !acked || d == nil; {
		f := cl.next()
		switch {
		case f.Ref == "a":
			if f.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("the client's approval: %+v", f.Msg)
			}
			acked = true
		case f.Msg.MessageType() == protocol.TypeApprovalDecided:
			d = f.Msg.(*protocol.ApprovalDecided)
		}
	}
	if d.Decider.Side != "client" || d.DecidedBy != "ada" {
		t.Fatalf("approval_decided %+v", d)
	}
	_ = s.Cancel(id, "")
}
