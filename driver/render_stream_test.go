package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// registerRenders adds note.show, a render capability whose props stream,
// and card.show, one whose props do not.
func registerRenders(t *testing.T, s *session.Session) {
	t.Helper()
	for _, streaming := range []bool{true, false} {
		name := "card.show"
		if streaming {
			name = "note.show"
		}
		c := agentCap(name, `{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"},"status":{"type":"string"}},"additionalProperties":false}`)
		c.Kind = protocol.KindRender
		c.Render = &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://r.example/" + name + ".html"},
			Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "**{{title}}**", Streaming: streaming}
		if err := s.RegisterAgent(c, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
			return json.RawMessage(`{"shown":true}`), nil
		})); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRenderStreamedProps plays a step whose tool calls stream their
// arguments (testdata/*_render_stream.txt): the streaming render
// capability's props go out as partial render_invoked events while they
// arrive — at least two, growing, then the final one — all with the call's
// id and in that order; the render capability that does not stream gets
// only its final render_invoked.
func TestRenderStreamedProps(t *testing.T) {
	for _, tc := range []struct {
		p          provider
		transcript string
	}{{openAI, "openai_render_stream.txt"}, {anthropic, "anthropic_render_stream.txt"}} {
		t.Run(tc.p.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			registerRenders(t, f.s)
			wantReason(t, f.turn("show the release notes and the build"), protocol.TurnCompleted, "")

			f.journal.mu.Lock()
			evs := append([]session.Event(nil), f.journal.events...)
			f.journal.mu.Unlock()
			byCall := map[string][]string{} // call id → its events, in order
			ids := map[string]string{}      // capability → call id
			var finalNote json.RawMessage
			for _, ev := range evs {
				switch m := ev.Msg.(type) {
				case *protocol.RenderInvoked:
					ids[m.CapabilityName] = m.CallID
					kind := "render"
					if m.Partial {
						kind = "partial"
						var v map[string]string
						if err := json.Unmarshal(m.Props, &v); err != nil {
							t.Fatalf("partial props are not a JSON object: %s", m.Props)
						}
						kind += fmt.Sprintf("(%d)", len(v["body"]))
					} else if m.CapabilityName == "note.show" {
						finalNote = m.Props
					}
					byCall[m.CallID] = append(byCall[m.CallID], kind)
				case *protocol.CapabilityInvoked:
					byCall[m.CallID] = append(byCall[m.CallID], "invoked")
				case *protocol.CapabilityOutcome:
					byCall[m.CallID] = append(byCall[m.CallID], "outcome")
				}
			}
			note := byCall[ids["note.show"]]
			t.Logf("note.show: %v", note)
			var partialBodies []int
			for _, k := range note {
				var n int
				if _, err := fmt.Sscanf(k, "partial(%d)", &n); err == nil {
					partialBodies = append(partialBodies, n)
				}
			}
			if len(partialBodies) < 2 {
				t.Fatalf("note.show had %d partial render_invoked events, want at least 2: %v", len(partialBodies), note)
			}
			for i := 1; i < len(partialBodies); i++ {
				if partialBodies[i] <= partialBodies[i-1] {
					t.Fatalf("the partial props do not grow: %v", partialBodies)
				}
			}
			for _, k := range note[:len(partialBodies)] {
				if !strings.HasPrefix(k, "partial") {
					t.Fatalf("note.show's events: %v, want the partials first", note)
				}
			}
			if got := strings.Join(note[len(partialBodies):], " "); got != "invoked render outcome" {
				t.Fatalf("note.show's events: %v, want the partials, then invoked render outcome", note)
			}
			if !strings.Contains(string(finalNote), "Ship the render streams. Ship") || !strings.HasSuffix(string(finalNote), `. "}`) {
				t.Fatalf("final props %s", finalNote)
			}
			if card := strings.Join(byCall[ids["card.show"]], " "); card != "invoked render outcome" {
				t.Fatalf("card.show's events: %s, want only the final render", card)
			}
			f.wantTranscript(
				"user: show the release notes and the build",
				f.transcript()[1], // the assistant's calls, checked above through the events
				"tool "+callIDOf(tc.p, "note")+" note.show: ok",
				"tool "+callIDOf(tc.p, "card")+" card.show: ok",
				"assistant: Shown.",
			)
			if f.s.PendingCalls() != 0 {
				t.Fatal("calls left pending")
			}
		})
	}
}

func callIDOf(p provider, what string) string {
	if p.name == "anthropic" {
		return "toolu_" + what
	}
	return "call_" + what
}

// TestRenderStreamClosedOnFailure: a step cut off while a streaming render
// capability's arguments arrive leaves no partial props without an end —
// the stream ends with a lone cancelled outcome — and no call.
func TestRenderStreamClosedOnFailure(t *testing.T) {
	f := newFixture(t, openAI, "openai_render_stream_truncated.txt", nil)
	registerRenders(t, f.s)
	wantReason(t, f.turn("show the notes"), protocol.TurnError, "")
	var partial, invoked int
	var outcome *protocol.CapabilityOutcome
	f.journal.mu.Lock()
	for _, ev := range f.journal.events {
		switch m := ev.Msg.(type) {
		case *protocol.RenderInvoked:
			if m.Partial {
				partial++
			}
		case *protocol.CapabilityInvoked:
			invoked++
		case *protocol.CapabilityOutcome:
			outcome = m
		}
	}
	f.journal.mu.Unlock()
	if partial == 0 || invoked != 0 || outcome == nil || outcome.Outcome.Err == nil || outcome.Outcome.Err.Code != protocol.CodeCancelled {
		t.Fatalf("%d partials, %d calls, outcome %+v: want partials, no call, a cancelled outcome", partial, invoked, outcome)
	}
}

// streamingModel is a Model of one's own that streams a tool call's
// arguments: it passes each piece to Request.ToolCallDelta as it arrives.
type streamingModel struct{ steps int }

func (m *streamingModel) Step(_ context.Context, req *driver.Request, _ func(string)) (*driver.Reply, error) {
	m.steps++
	if m.steps > 1 {
		return &driver.Reply{Text: "Shown."}, nil
	}
	name := req.ToolName("note.show") // the name the tool was offered under
	args := ""
	for _, piece := range []string{`{"title":"Rel`, `ease notes"}`} {
		req.ToolCallDelta(0, name, piece)
		args += piece
	}
	return &driver.Reply{ToolCalls: []protocol.ToolCall{{ID: "call_1", Name: name, Input: json.RawMessage(args)}}}, nil
}

func ExampleRequest_ToolCallDelta() {
	s := session.New("demo", nil)
	_ = s.RegisterAgent(protocol.Capability{Name: "note.show", Description: "Show a note.", Kind: protocol.KindRender,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`),
		Side:        protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
		Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://r.example/note.html"},
			Targets: []protocol.RenderTarget{protocol.TargetChat}, Streaming: true}},
		session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }))

	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	_, _ = driver.New(&streamingModel{}, nil).Turn(context.Background(), s, "show the release notes")
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			return
		}
		switch m := ev.Msg.(type) {
		case *protocol.RenderInvoked:
			fmt.Printf("render_invoked partial=%v props=%s\n", m.Partial, m.Props)
		case *protocol.TurnEnded:
			fmt.Println("turn", m.Reason)
			return
		}
	}
	// Output:
	// render_invoked partial=true props={"title":"Rel"}
	// render_invoked partial=false props={"title":"Release notes"}
	// turn completed
}
