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

const (
	appAToken = "app-token-a-0123456789"
	appBToken = "app-token-b-0123456789"
)

func twoAppFixture(t *testing.T) *fixture {
	t.Helper()
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"},
		server.Token{Token: appAToken, Side: "app", App: "a", Tenant: "t"}, server.Token{Token: appBToken, Side: "app", App: "b", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(server.ManagerOptions{})
	ts := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr}))
	t.Cleanup(ts.Close)
	return &fixture{t: t, srv: ts, mgr: mgr}
}

func appCapOf(app, name string) protocol.Capability {
	return protocol.Capability{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideApp, Origin: protocol.Origin{Kind: protocol.OriginApp, ID: app}}
}

// rawUntil reads raw frames until one with seq >= last, and returns every
// frame read.
func (c *wsClient) rawUntil(last uint64) []string {
	c.t.Helper()
	var out []string
	for {
		_, b, err := c.conn.Read(c.ctx)
		if err != nil {
			c.t.Fatalf("read (after %d frames): %v", len(out), err)
		}
		out = append(out, string(b))
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			c.t.Fatalf("undecodable frame %s: %v", b, err)
		}
		if f.Seq >= last && f.Ref == "" {
			return out
		}
	}
}

// answer registers what app c owns, serves one call with result, and returns
// the call id.
func (c *wsClient) answerOne(result string) string {
	c.t.Helper()
	inv := c.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
	c.send("r-"+inv.CallID, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(result)})
	return inv.CallID
}

// TestCallEventsFollowTheCallsOwner (issue 9, finding 2): app a's
// capability is called with a secret; a deregisters; app b registers the
// same name. b never receives a's input or result — in a replay from 0, a
// snapshot, or live — while it does receive the events of its own call.
func TestCallEventsFollowTheCallsOwner(t *testing.T) {
	f := twoAppFixture(t)
	const sid = "leak"
	a := f.dial(appAToken, sid, "?after=0")
	a.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appCapOf("a", "shared.tool"), appCapOf("a", "a.other")}})
	if r := a.reply("reg"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("register: %+v", r.Msg)
	}
	s, release, err := f.mgr.Acquire(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// b is connected, live, before anything happens: bLive acts, bWatch
	// only records what arrives.
	bLive := f.dial(appBToken, sid, "?after=0")
	bWatch := f.dial(appBToken, sid, fmt.Sprintf("?after=%d", s.LastSeq()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	done := make(chan protocol.Outcome, 1)
	go func() {
		done <- s.Invoke(ctx, protocol.AudienceLLM, "shared.tool", json.RawMessage(`{"q":"input-secret-A"}`))
	}()
	a.answerOne(`{"r":"result-secret-A"}`)
	if out := <-done; !out.IsOK() {
		t.Fatalf("a's call: %+v", out.Err)
	}
	// a keeps a call pending on another capability (snapshot material).
	pendingA, perr := s.Start(protocol.AudienceLLM, "a.other", json.RawMessage(`{"q":"pending-secret-A"}`))
	if perr != nil {
		t.Fatal(perr)
	}
	a.until(func(f *protocol.Frame) bool {
		inv, ok := f.Msg.(*protocol.CapabilityInvoked)
		return ok && inv.CallID == pendingA
	})
	a.send("dereg", &protocol.CapabilityDeregister{Names: []string{"shared.tool"}})
	if r := a.reply("dereg"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("deregister: %+v", r.Msg)
	}
	bLive.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appCapOf("b", "shared.tool")}})
	if r := bLive.reply("reg"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("b's register: %+v", r.Msg)
	}
	// b's own call: b must see it (the filter is not just "nothing").
	go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "shared.tool", json.RawMessage(`{"q":"b-input"}`)) }()
	bCall := bLive.answerOne(`{"r":"b-result"}`)
	if out := <-done; !out.IsOK() {
		t.Fatalf("b's call: %+v", out.Err)
	}
	// A last event everyone sees, to know where the stream ends.
	cl := f.dial(clientToken, sid, "?after=0")
	cl.send("end", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.end", false)}})
	cl.reply("end")
	last := s.LastSeq()

	leaks := []string{"input-secret-A", "result-secret-A", "pending-secret-A"}
	check := func(t *testing.T, frames []string, wantOwn bool) {
		t.Helper()
		all := strings.Join(frames, "\n")
		for _, secret := range leaks {
			if strings.Contains(all, secret) {
				t.Errorf("b received %q:\n%s", secret, all)
			}
		}
		if own := strings.Contains(all, "b-input") && strings.Contains(all, "b-result") && strings.Contains(all, bCall); own != wantOwn {
			t.Errorf("b's own call in its stream: %v, want %v:\n%s", own, wantOwn, all)
		}
	}
	t.Run("live", func(t *testing.T) { check(t, bWatch.rawUntil(last), true) })
	t.Run("replay from 0", func(t *testing.T) { check(t, f.dial(appBToken, sid, "?after=0").rawUntil(last), true) })
	t.Run("snapshot", func(t *testing.T) {
		b := f.dial(appBToken, sid, "")
		frames := b.rawUntil(last)
		snap, err := protocol.DecodeFrame([]byte(frames[0]))
		if err != nil || snap.Msg.MessageType() != protocol.TypeSnapshot {
			t.Fatalf("first frame %s, want a snapshot", frames[0])
		}
		check(t, frames, false)
		if got := len(snap.Msg.(*protocol.Snapshot).PendingCalls); got != 0 {
			t.Errorf("b's snapshot lists %d pending calls, want none of a's", got)
		}
		// The owner and the client still see a's pending call.
		for _, tok := range []string{appAToken, clientToken} {
			first := f.dial(tok, sid, "").next().Msg.(*protocol.Snapshot)
			if len(first.PendingCalls) != 1 || first.PendingCalls[0].CallID != pendingA {
				t.Errorf("snapshot for %s: pending %+v, want a's call %s", tok[:10], first.PendingCalls, pendingA)
			}
		}
	})
	_ = s.Cancel(pendingA, "test over")
}

// TestOperatorSeesEverything: an operator's connection gets every call
// event, like the client's. (The transport authenticates operators; here
// the peer is given directly.)
func TestVisibleToOperator(t *testing.T) {
	s := session.New("op", nil)
	if err := s.Register(session.App("a"), appCapOf("a", "a.tool")); err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(0)
	defer sub.Close()
	id, perr := s.Start(protocol.AudienceLLM, "a.tool", json.RawMessage(`{}`))
	if perr != nil {
		t.Fatal(perr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if inv, ok := ev.Msg.(*protocol.CapabilityInvoked); ok && inv.CallID == id {
			if !ev.Owner.Same(session.App("a")) {
				t.Fatalf("event owner %v, want app a", ev.Owner)
			}
			break
		}
	}
	_ = s.Cancel(id, "")
	_ = websocket.StatusNormalClosure
}
