package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// appRenderOf is app's render capability name, whose props stream.
func appRenderOf(app, name string) protocol.Capability {
	c := appCapOf(app, name)
	c.Kind = protocol.KindRender
	c.Render = &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://r.example/c.html"},
		Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "chart", Streaming: true}
	return c
}

// peerView is what one peer received of the calls: per call id, whether
// it saw partials, the final render_invoked and the outcome, and every
// frame's text.
type peerView struct {
	partial, final, outcome map[string]bool
	text                    string
}

func viewOf(t *testing.T, frames []string) peerView {
	t.Helper()
	v := peerView{partial: map[string]bool{}, final: map[string]bool{}, outcome: map[string]bool{}, text: strings.Join(frames, "\n")}
	for _, raw := range frames {
		f, err := protocol.DecodeFrame([]byte(raw))
		if err != nil {
			t.Fatalf("undecodable frame %s: %v", raw, err)
		}
		switch m := f.Msg.(type) {
		case *protocol.RenderInvoked:
			if m.Partial {
				v.partial[m.CallID] = true
			} else {
				v.final[m.CallID] = true
			}
		case *protocol.CapabilityOutcome:
			v.outcome[m.CallID] = true
		}
	}
	return v
}

// TestRenderStreamVisibility runs render streams over real WebSockets with
// apps a and b and the client connected: a's streamed call, a stream whose
// capability a gives up and b takes over mid-stream, and b's own. A
// partial reaches a peer only if that peer sees how the call ended (its
// final render_invoked, or the lone outcome of a stream never made), and
// never a peer that does not own the call — live and in a replay.
func TestRenderStreamVisibility(t *testing.T) {
	f := twoAppFixture(t)
	const sid = "streams"
	a := f.dial(appAToken, sid, "?after=0")
	a.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appRenderOf("a", "shared.chart")}})
	if r := a.reply("reg"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("register: %+v", r.Msg)
	}
	s, release, err := f.mgr.Acquire(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	b := f.dial(appBToken, sid, "?after=0")
	b.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appRenderOf("b", "b.chart")}})
	if r := b.reply("reg"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("b's register: %+v", r.Msg)
	}
	start := s.LastSeq()
	bWatch := f.dial(appBToken, sid, "?after=0")
	aWatch := f.dial(appAToken, sid, "?after=0")
	client := f.dial(clientToken, sid, "?after=0")      // acts
	clientWatch := f.dial(clientToken, sid, "?after=0") // only records what arrives
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := func(name, partial string) *session.RenderStream {
		t.Helper()
		rs, err := s.StreamRender(protocol.AudienceLLM, name)
		if err != nil {
			t.Fatal(err)
		}
		if !rs.AppendArguments(`{"title":"` + partial) {
			t.Fatalf("no partial for %s", name)
		}
		return rs
	}
	invoke := func(rs *session.RenderStream, input string, answer *wsClient) string {
		t.Helper()
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.InvokeStreamed(ctx, rs, json.RawMessage(input)) }()
		id := answer.answerOne(`{"shown":true}`)
		if out := <-done; !out.IsOK() {
			t.Fatalf("streamed call: %+v", out.Err)
		}
		return id
	}

	// 1. a's own streamed call.
	if id := invoke(stream("shared.chart", "partial-secret-A"), `{"title":"final-secret-A"}`, a); id == "" {
		t.Fatal("no call")
	}
	// 2. a gives the name up mid-stream, b takes it.
	stolen := stream("shared.chart", "stolen-partial-A")
	a.send("dereg", &protocol.CapabilityDeregister{Names: []string{"shared.chart"}})
	if r := a.reply("dereg"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("deregister: %+v", r.Msg)
	}
	b.send("reg2", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appRenderOf("b", "shared.chart")}})
	if r := b.reply("reg2"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("b's register: %+v", r.Msg)
	}
	if stolen.AppendArguments(` more-stolen-partial"`) {
		t.Fatal("a partial went out after the capability changed hands")
	}
	bCall := invoke(stolen, `{"title":"b-final"}`, b)
	if bCall == stolen.CallID() {
		t.Fatal("b's call has the id of the partials a drew")
	}
	// 3. b's own stream, closed without a call.
	own := stream("b.chart", "b-partial")
	own.Close()

	// A last event everyone sees, to know where the stream ends.
	client.send("end", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.end", false)}})
	client.reply("end")
	last := s.LastSeq()
	if last <= start {
		t.Fatal("nothing happened")
	}

	views := map[string]peerView{
		"a live":   viewOf(t, aWatch.rawUntil(last)),
		"b live":   viewOf(t, bWatch.rawUntil(last)),
		"a replay": viewOf(t, f.dial(appAToken, sid, "?after=0").rawUntil(last)),
		"b replay": viewOf(t, f.dial(appBToken, sid, "?after=0").rawUntil(last)),
		"client":   viewOf(t, clientWatch.rawUntil(last)),
	}
	for name, v := range views {
		t.Run(name, func(t *testing.T) {
			for id := range v.partial {
				if !v.final[id] && !v.outcome[id] {
					t.Errorf("call %s: partials, but neither its final render_invoked nor its outcome", id)
				}
				if views["client"].final[id] && !v.final[id] {
					t.Errorf("call %s: partials, but not the final render_invoked the client saw", id)
				}
			}
			if name == "client" { // sees everything
				if !v.partial[stolen.CallID()] || !v.outcome[stolen.CallID()] || !strings.Contains(v.text, "b-partial") {
					t.Errorf("the client did not see every stream")
				}
				return
			}
			isB := strings.HasPrefix(name, "b")
			for _, secret := range []string{"partial-secret-A", "final-secret-A", "stolen-partial-A"} {
				if isB && strings.Contains(v.text, secret) {
					t.Errorf("b received %q", secret)
				}
			}
			if isB && (!strings.Contains(v.text, "b-partial") || !strings.Contains(v.text, "b-final")) {
				t.Errorf("b did not receive its own stream and call")
			}
			if !isB && (strings.Contains(v.text, "b-partial") || strings.Contains(v.text, "b-final")) {
				t.Errorf("%s received b's stream or call", name)
			}
			if !isB && !(v.partial[stolen.CallID()] && v.outcome[stolen.CallID()]) {
				t.Errorf("a did not see the partials it drew end")
			}
		})
	}
}

// TestRenderStreamSessionDeleted: a session deleted while its turn
// streams props cancels the turn — the model loop stops, and makes no
// call on a session nobody can reach — and the stream ends.
func TestRenderStreamSessionDeleted(t *testing.T) {
	f := twoAppFixture(t)
	const sid = "deleted"
	a := f.dial(appAToken, sid, "?after=0")
	a.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appRenderOf("a", "a.chart")}})
	if r := a.reply("reg"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("register: %+v", r.Msg)
	}
	s, release, err := f.mgr.Acquire(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	streaming := make(chan *session.RenderStream, 1)
	stopped := make(chan error, 1)
	// A runner like the driver's: it streams a call's props while "the
	// model" writes them, until its context ends.
	s.SetTurnRunner(func(ctx context.Context, s *session.Session, _ int) (protocol.TurnReason, error) {
		rs, err := s.StreamRender(protocol.AudienceLLM, "a.chart")
		if err != nil {
			stopped <- err
			return protocol.TurnError, err
		}
		rs.AppendArguments(`{"title":"half`)
		streaming <- rs
		<-ctx.Done()
		rs.Close()
		stopped <- nil
		return protocol.TurnCancelled, ctx.Err()
	})
	if _, err := s.StartTurn(session.Client, "draw"); err != nil {
		t.Fatal(err)
	}
	var rs *session.RenderStream
	select {
	case rs = <-streaming:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not start streaming")
	}
	release()
	if _, err := f.mgr.Delete(context.Background(), sid); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the turn of a deleted session kept running")
	}
	if rs.AppendArguments(`er and more"}`) {
		t.Fatal("a partial went out after the stream ended")
	}
	if n := s.PendingCalls(); n != 0 {
		t.Fatalf("%d calls pending in the deleted session", n)
	}
}

// TestRenderStreamRestart: a kernel stops (the store keeps the journal)
// while a render stream has shown partials; the next kernel, restoring the
// session from the store, ends the stream once — the client sees the
// partials' end, nothing is pending — and a third start adds nothing.
func TestRenderStreamRestart(t *testing.T) {
	dir := t.TempDir()
	chart := protocol.Capability{Name: "env.chart", Description: "Chart.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Kind: protocol.KindRender, Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
		Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://r.example/c.html"},
			Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "chart", Streaming: true}}
	shown := session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
	// run starts a kernel on dir, opens session "rs", runs act on it, and
	// returns the events the store holds when the kernel stops.
	run := func(act func(s *session.Session)) []session.Event {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		st, err := store.Open(ctx, &store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		mgr := server.NewManager(server.ManagerOptions{Store: st, Attach: func(s *session.Session) error { return s.RegisterAgent(chart, shown) }})
		s, release, err := mgr.Acquire(ctx, "rs")
		if err != nil {
			t.Fatal(err)
		}
		act(s)
		release()
		events, err := st.Load(ctx, "rs")
		if err != nil {
			t.Fatal(err)
		}
		return events
	}
	var id string
	first := run(func(s *session.Session) {
		rs, err := s.StreamRender(protocol.AudienceLLM, "env.chart")
		if err != nil {
			t.Fatal(err)
		}
		if !rs.AppendArguments(`{"title":"cut off`) {
			t.Fatal("no partial")
		}
		id = rs.CallID() // the kernel stops here, the stream still open
	})
	ends := func(events []session.Event) (partials, outcomes int) {
		for _, e := range events {
			switch m := e.Msg.(type) {
			case *protocol.RenderInvoked:
				if m.CallID == id && m.Partial {
					partials++
				}
			case *protocol.CapabilityOutcome:
				if m.CallID == id {
					outcomes++
					if m.Outcome.Err == nil || m.Outcome.Err.Code != protocol.CodeCancelled {
						t.Fatalf("the stream ended %+v, want cancelled", m.Outcome)
					}
				}
			}
		}
		return partials, outcomes
	}
	if p, o := ends(first); p != 1 || o != 0 {
		t.Fatalf("stored before the restart: %d partials, %d outcomes", p, o)
	}
	for i := range 2 {
		events := run(func(s *session.Session) {
			if n := s.PendingCalls(); n != 0 {
				t.Errorf("restart %d: %d calls pending", i+1, n)
			}
		})
		if p, o := ends(events); p != 1 || o != 1 {
			t.Fatalf("restart %d: %d partials, %d outcomes of the stream, want 1 and 1", i+1, p, o)
		}
	}
}

// TestPeerFrameNotUTF8: a peer's frame that is not UTF-8 — a result or an
// input holding raw bytes, which would reach the other peers' text frames
// (a browser fails the connection on them, again on every resume) — is
// refused, and the call it answers is still open to a proper result.
func TestPeerFrameNotUTF8(t *testing.T) {
	f := twoAppFixture(t)
	const sid = "utf8"
	a := f.dial(appAToken, sid, "?after=0")
	a.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appCapOf("a", "a.tool")}})
	a.reply("reg")
	s, release, err := f.mgr.Acquire(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	watch := f.dial(clientToken, sid, "?after=0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan protocol.Outcome, 1)
	go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "a.tool", json.RawMessage(`{}`)) }()
	inv := a.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
	for _, tc := range []struct{ name, frame string }{
		// Printable ASCII around the bad bytes, so that the result fast path is tried too.
		{"a result", `{"v":2,"id":"bad1","msg":{"type":"capability_result","callId":"` + inv.CallID + `","result":{"text":"` + "\xff\xfe" + `"}}}`},
		{"a result with escapes", `{"v":2,"id":"bad2","msg":{"type":"capability_result","callId":"` + inv.CallID + `","result":{"t\u00e9xt":"` + "\xc3" + `"}}}`},
		{"an invocation", `{"v":2,"id":"bad3","msg":{"type":"capability_invoke","name":"a.tool","input":{"q":"` + "\xed\xa0\x80" + `"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.sendRaw(tc.frame)
			r := a.until(func(f *protocol.Frame) bool { return f.Ref != "" })
			e, ok := r.Msg.(*protocol.ErrorReply)
			if !ok || !strings.Contains(e.Message, "UTF-8") {
				t.Fatalf("reply %+v, want an error naming UTF-8", r.Msg)
			}
		})
	}
	a.send("good", &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{"text":"ok"}`)})
	if out := <-done; !out.IsOK() {
		t.Fatalf("the call after the refused frames: %+v", out.Err)
	}
	watch.send("end", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.end", false)}})
	last := s.LastSeq()
	for _, fr := range f.dial(clientToken, sid, "?after=0").rawUntil(last) {
		if !utf8.ValidString(fr) {
			t.Fatalf("the client received a frame that is not UTF-8: %q", fr)
		}
	}
}
