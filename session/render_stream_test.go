package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// renderCap is an agent-side render capability answering {"shown":true}.
func renderCap(name string, streaming bool) protocol.Capability {
	return protocol.Capability{Name: name, Description: "Draw " + name + ".", Kind: protocol.KindRender,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}},"additionalProperties":false}`),
		Side:        protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
		Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://r.example/x.html"},
			Targets: []protocol.RenderTarget{protocol.TargetPreview}, Fallback: "**{{title}}**", Streaming: streaming}}
}

func streamSession(t *testing.T, opts *session.Options, caps ...protocol.Capability) *session.Session {
	t.Helper()
	s := session.New("render-stream", opts)
	for _, c := range caps {
		if err := s.RegisterAgent(c, returns(`{"shown":true}`, nil)); err != nil {
			t.Fatalf("register %s: %v", c.Name, err)
		}
	}
	return s
}

// chunks splits the arguments text of a long note into fragments of about
// 600 bytes, each growing the text past the stream's byte step, so that
// every fragment may emit a partial without waiting for the clock.
func chunks(body string) (full string, parts []string) {
	full = `{"title":"Release notes","body":"` + body + `"}`
	for i := 0; i < len(full); i += 600 {
		parts = append(parts, full[i:min(i+600, len(full))])
	}
	return full, parts
}

// partials returns the partial render_invoked events of call id among evs.
func partials(evs []session.Event, id string) []*protocol.RenderInvoked {
	var out []*protocol.RenderInvoked
	for _, m := range only[*protocol.RenderInvoked](evs) {
		if m.CallID == id && m.Partial {
			out = append(out, m)
		}
	}
	return out
}

func TestRenderStream(t *testing.T) {
	t.Run("partials, then the call with the same id", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		before := s.LastSeq()
		rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
		if err != nil {
			t.Fatal(err)
		}
		if s.LastSeq() != before {
			t.Fatal("reserving a stream emitted an event")
		}
		full, parts := chunks(strings.Repeat("all work and no play ", 150))
		sent := 0
		for _, p := range parts {
			if rs.AppendArguments(p) {
				sent++
			}
		}
		if sent < 3 {
			t.Fatalf("%d partials from %d fragments, want at least 3", sent, len(parts))
		}
		if s.PendingCalls() != 0 {
			t.Fatal("a partial started a call")
		}
		out := s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(full))
		wantValue(t, out, `{"shown":true}`)
		evs := allEvents(t, s)
		got := trail(evs, rs.CallID())
		want := []protocol.Type{}
		for range sent {
			want = append(want, protocol.TypeRenderInvoked)
		}
		want = append(want, protocol.TypeCapabilityInvoked, protocol.TypeRenderInvoked, protocol.TypeCapabilityOutcome)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events of the call: %v, want %v", got, want)
		}
		ps := partials(evs, rs.CallID())
		if len(ps) != sent {
			t.Fatalf("%d partial events, want %d", len(ps), sent)
		}
		prev := 0
		for i, p := range ps {
			var v struct{ Title, Body string }
			if err := json.Unmarshal(p.Props, &v); err != nil {
				t.Fatalf("partial %d is not a JSON object: %s", i, p.Props)
			}
			if len(v.Body) < prev || !strings.HasPrefix(full, `{"title":"`+v.Title) {
				t.Fatalf("partial %d does not grow the props: %s", i, p.Props)
			}
			prev = len(v.Body)
		}
		final := only[*protocol.RenderInvoked](evs)
		last := final[len(final)-1]
		if last.Partial || last.CallID != rs.CallID() || !jsonEqual(last.Props, []byte(full)) {
			t.Fatalf("final render_invoked %+v", last)
		}
		b, _ := json.Marshal(last)
		if strings.Contains(string(b), "partial") {
			t.Fatalf("the final render_invoked is not the seed's shape: %s", b)
		}
		if rs.Props(json.RawMessage(`{"title":"late"}`)) || rs.AppendArguments(`x`) {
			t.Fatal("a partial went out after the call started")
		}
		wantCode(t, s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(full)), protocol.CodeInvalidRequest)
	})

	t.Run("refused streams emit nothing", func(t *testing.T) {
		approval := renderCap("approved.show", true)
		approval.RequiresApproval = true
		hidden := renderCap("hidden.show", true)
		hidden.Audience = []protocol.Audience{protocol.AudienceRuntime}
		s := streamSession(t, nil, renderCap("still.show", false), approval, hidden)
		if err := s.RegisterAgent(agentCap("plain"), returns(`{}`, nil)); err != nil {
			t.Fatal(err)
		}
		before := s.LastSeq()
		for _, tc := range []struct {
			name    string
			invoker protocol.Audience
			capName string
			code    protocol.Code
		}{
			{"unknown capability", protocol.AudienceLLM, "nope", protocol.CodeNotFound},
			{"not visible to the invoker", protocol.AudienceLLM, "hidden.show", protocol.CodeForbidden},
			{"render without streaming", protocol.AudienceLLM, "still.show", protocol.CodeInvalidRequest},
			{"not a render capability", protocol.AudienceLLM, "plain", protocol.CodeInvalidRequest},
			{"requires approval", protocol.AudienceLLM, "approved.show", protocol.CodeInvalidRequest},
			{"unknown invoker", "robot", "hidden.show", protocol.CodeInvalidRequest},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rs, err := s.StreamRender(tc.invoker, tc.capName)
				if rs != nil {
					t.Fatalf("got a stream for %s", tc.capName)
				}
				wantErrCode(t, err, tc.code)
			})
		}
		if s.LastSeq() != before {
			t.Fatal("a refused stream emitted events")
		}
		if _, err := s.StreamRender(protocol.AudienceRuntime, "hidden.show"); err != nil {
			t.Fatalf("the runtime may stream its own: %v", err)
		}
	})

	t.Run("hostile partials are dropped", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		before := s.LastSeq()
		big := `{"body":"` + strings.Repeat("x", 256<<10) + `"}`
		for _, tc := range []struct{ name, props string }{
			{"empty", ``},
			{"not JSON", `{"title":`},
			{"an array", `[1,2]`},
			{"a string", `"hello"`},
			{"invalid UTF-8", "{\"title\":\"\xff\"}"},
			{"too large", big},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if rs.Props(json.RawMessage(tc.props)) {
					t.Fatalf("props %.40q went out", tc.props)
				}
			})
		}
		if s.LastSeq() != before {
			t.Fatal("a dropped partial emitted an event")
		}
		if rs.AppendArguments(`not json at all`) || rs.AppendArguments(`{`) {
			t.Fatal("arguments that are not the start of a JSON object went out")
		}
		if s.LastSeq() != before {
			t.Fatal("a dropped partial emitted an event")
		}
	})

	t.Run("a stream closed without a call ends with cancelled, no call pending", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		if !rs.Props(json.RawMessage(`{"title":"Dra"}`)) {
			t.Fatal("the first partial did not go out")
		}
		rs.Close()
		rs.Close() // twice: nothing more
		evs := allEvents(t, s)
		if got := fmt.Sprint(trail(evs, rs.CallID())); got != "[render_invoked capability_outcome]" {
			t.Fatalf("events of the stream: %s", got)
		}
		outs := only[*protocol.CapabilityOutcome](evs)
		if len(outs) != 1 || outs[0].Outcome.Err == nil || outs[0].Outcome.Err.Code != protocol.CodeCancelled {
			t.Fatalf("outcome %+v", outs)
		}
		if s.PendingCalls() != 0 || len(only[*protocol.CapabilityInvoked](evs)) != 0 {
			t.Fatal("closing a stream left or made a call")
		}
		wantErrCode(t, s.Cancel(rs.CallID(), ""), protocol.CodeConflict) // "already finished with cancelled"
		wantCode(t, s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"Draft"}`)), protocol.CodeInvalidRequest)

		quiet, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		last := s.LastSeq()
		quiet.Close()
		if s.LastSeq() != last {
			t.Fatal("closing a stream that showed nothing emitted an event")
		}
	})

	t.Run("a call refused after its partials ends them with its error", func(t *testing.T) {
		var mu sync.Mutex
		var observed []session.CallEvent
		s := streamSession(t, &session.Options{Observe: func(e session.CallEvent) { mu.Lock(); observed = append(observed, e); mu.Unlock() }}, renderCap("note.show", true))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		rs.AppendArguments(`{"title":"x","colour":"re`)
		out := s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"x","colour":"red"}`))
		wantCode(t, out, protocol.CodeInvalidInput)
		evs := allEvents(t, s)
		if got := fmt.Sprint(trail(evs, rs.CallID())); got != "[render_invoked capability_outcome]" {
			t.Fatalf("events of the stream: %s", got)
		}
		if o := only[*protocol.CapabilityOutcome](evs)[0]; o.Outcome.Err.Code != protocol.CodeInvalidInput {
			t.Fatalf("outcome %+v", o.Outcome)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(observed) != 1 || observed[0].Kind != session.CallFinished || observed[0].CallID != rs.CallID() {
			t.Fatalf("observed %+v, want one CallFinished of call %s", observed, rs.CallID())
		}
	})

	t.Run("a stream of another session", func(t *testing.T) {
		a := streamSession(t, nil, renderCap("note.show", true))
		b := streamSession(t, nil, renderCap("note.show", true))
		rs, _ := a.StreamRender(protocol.AudienceLLM, "note.show")
		defer rs.Close()
		wantCode(t, b.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{}`)), protocol.CodeInvalidRequest)
		wantCode(t, b.InvokeStreamed(waitCtx(t), nil, json.RawMessage(`{}`)), protocol.CodeInvalidRequest)
		if len(only[*protocol.CapabilityInvoked](allEvents(t, b))) != 0 || b.PendingCalls() != 0 {
			t.Fatal("a foreign stream made a call")
		}
	})

	t.Run("a registration replaced mid-stream stops the partials", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		defer rs.Close()
		if err := s.Deregister(session.Runtime, "note.show"); err != nil {
			t.Fatal(err)
		}
		if rs.Props(json.RawMessage(`{"title":"x"}`)) {
			t.Fatal("a partial went out for a deregistered capability")
		}
	})

	t.Run("partials belong to the capability's owner", func(t *testing.T) {
		s := session.New("owners", nil)
		c := renderCap("app.chart", true)
		c.Side, c.Origin = protocol.SideApp, protocol.Origin{Kind: protocol.OriginApp, ID: "charts"}
		if err := s.Register(session.App("charts"), c); err != nil {
			t.Fatal(err)
		}
		sub := watch(t, s)
		rs, err := s.StreamRender(protocol.AudienceLLM, "app.chart")
		if err != nil {
			t.Fatal(err)
		}
		rs.Props(json.RawMessage(`{"title":"a"}`))
		rs.Close()
		for _, typ := range []protocol.Type{protocol.TypeRenderInvoked, protocol.TypeCapabilityOutcome} {
			ev, err := sub.Next(waitCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Msg.MessageType() != typ || !ev.Owner.Same(session.App("charts")) {
				t.Fatalf("event %s owned by %v, want %s owned by the app", ev.Msg.MessageType(), ev.Owner, typ)
			}
		}
	})

	t.Run("journaled, and a restore leaves no call", func(t *testing.T) {
		j := &memJournal{}
		s := streamSession(t, &session.Options{Journal: j}, renderCap("note.show", true))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		rs.Props(json.RawMessage(`{"title":"jo"}`))
		rs.Close()
		evs := j.events(t)
		if ps := partials(evs, rs.CallID()); len(ps) != 1 || string(ps[0].Props) != `{"title":"jo"}` {
			t.Fatalf("journaled partials %+v", ps)
		}
		r, err := session.Restore("render-stream", evs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.PendingCalls() != 0 || r.LastSeq() != s.LastSeq() {
			t.Fatalf("restored: %d pending, seq %d (want 0, %d)", r.PendingCalls(), r.LastSeq(), s.LastSeq())
		}
	})
}

// TestRenderStreamBounds runs the rate and count bounds on a fake clock.
func TestRenderStreamBounds(t *testing.T) {
	t.Run("rate: small growth waits for the interval", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s := streamSession(t, nil, renderCap("note.show", true))
			rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
			defer rs.Close()
			if !rs.Props(json.RawMessage(`{"title":"a"}`)) {
				t.Fatal("the first partial waited")
			}
			if rs.Props(json.RawMessage(`{"title":"ab"}`)) {
				t.Fatal("a second partial 0 ms later went out")
			}
			time.Sleep(49 * time.Millisecond)
			if rs.Props(json.RawMessage(`{"title":"abc"}`)) {
				t.Fatal("a partial 49 ms after the last went out")
			}
			time.Sleep(50 * time.Millisecond)
			if !rs.Props(json.RawMessage(`{"title":"abcd"}`)) {
				t.Fatal("a partial 50 ms after the last attempt waited")
			}
			if !rs.Props(json.RawMessage(`{"title":"` + strings.Repeat("e", 600) + `"}`)) {
				t.Fatal("a partial that grew by 600 bytes waited")
			}
			time.Sleep(time.Second)
			if rs.Props(json.RawMessage(`{"title":"` + strings.Repeat("e", 600) + `"}`)) {
				t.Fatal("a partial equal to the last went out")
			}
		})
	})
	t.Run("count: at most 64 partials", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s := streamSession(t, nil, renderCap("note.show", true))
			rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
			defer rs.Close()
			sent := 0
			for i := range 100 {
				if rs.Props(json.RawMessage(fmt.Sprintf(`{"title":"%d"}`, i))) {
					sent++
				}
				time.Sleep(60 * time.Millisecond)
			}
			if sent != 64 {
				t.Fatalf("%d partials went out, want 64", sent)
			}
		})
	})
	t.Run("arguments past 256 KiB stop the partials, not the call", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		body := strings.Repeat("y", 300<<10)
		rs.AppendArguments(`{"body":"`)
		if rs.AppendArguments(body) || rs.AppendArguments(`"}`) {
			t.Fatal("a partial over the limit went out")
		}
		wantValue(t, s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"body":"`+body+`"}`)), `{"shown":true}`)
	})
}

// TestRenderStreamRace: arguments streaming while the call is invoked from
// another goroutine never put a partial after the final render_invoked.
func TestRenderStreamRace(t *testing.T) {
	s := streamSession(t, nil, renderCap("note.show", true))
	for round := range 20 {
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		var wg sync.WaitGroup
		wg.Go(func() {
			rs.AppendArguments(`{"body":"`)
			for range 200 {
				rs.AppendArguments(strings.Repeat("z", 97))
			}
		})
		out := s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"body":"done"}`))
		wg.Wait()
		wantValue(t, out, `{"shown":true}`)
		seenFinal := false
		for _, ev := range allEvents(t, s) {
			if m, ok := ev.Msg.(*protocol.RenderInvoked); ok && m.CallID == rs.CallID() {
				if seenFinal {
					t.Fatalf("round %d: a render_invoked after the final one (partial %v)", round, m.Partial)
				}
				seenFinal = !m.Partial
			}
		}
		if !seenFinal {
			t.Fatalf("round %d: no final render_invoked", round)
		}
	}
}

func ExampleSession_StreamRender() {
	s := session.New("demo", nil)
	_ = s.RegisterAgent(protocol.Capability{Name: "note.show", Description: "Show a note.", Kind: protocol.KindRender,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`),
		Side:        protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
		Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://r.example/note.html"},
			Targets: []protocol.RenderTarget{protocol.TargetChat}, Streaming: true}},
		session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }))

	rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
	if err != nil {
		fmt.Println(err)
		return
	}
	rs.AppendArguments(`{"title":"Rele`) // the model is still writing
	out := s.InvokeStreamed(context.Background(), rs, json.RawMessage(`{"title":"Release notes"}`))
	fmt.Println(out.IsOK())

	sub := s.Subscribe(0)
	defer sub.Close()
	for seq := uint64(0); seq < s.LastSeq(); {
		ev, _ := sub.Next(context.Background())
		seq = ev.Seq
		if m, ok := ev.Msg.(*protocol.RenderInvoked); ok {
			fmt.Printf("render_invoked partial=%v props=%s\n", m.Partial, m.Props)
		}
	}
	// Output:
	// true
	// render_invoked partial=true props={"title":"Rele"}
	// render_invoked partial=false props={"title":"Release notes"}
}

// BenchmarkRenderStream streams 20 KiB of arguments in 20-byte fragments
// (a model's tokens) into one stream, then invokes the call: the cost a
// streamed call adds over its invocation.
func BenchmarkRenderStream(b *testing.B) {
	s := session.New("bench", &session.Options{LogSize: 1 << 16})
	if err := s.RegisterAgent(renderCap("note.show", true), returns(`{"shown":true}`, nil)); err != nil {
		b.Fatal(err)
	}
	full := `{"title":"Release notes","body":"` + strings.Repeat("Ship the render streams. ", 20<<10/25) + `"}`
	ctx := context.Background()
	partialsSent := 0
	for b.Loop() {
		rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(full); i += 20 {
			if rs.AppendArguments(full[i:min(i+20, len(full))]) {
				partialsSent++
			}
		}
		if out := s.InvokeStreamed(ctx, rs, json.RawMessage(full)); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
	b.ReportMetric(float64(partialsSent)/float64(b.N), "partials/op")
}
