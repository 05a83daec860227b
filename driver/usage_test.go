package driver_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
)

// TestUsage: the token usage each provider reports for a step is carried
// into the step's journaled assistant message (the conversation_message
// event and the conversation), with the step's and each call's duration;
// a step that reported none has no usage. OpenAI is asked for it
// (stream_options.include_usage); Anthropic's cache tokens count as input.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		p          provider
		transcript string
		want       []*protocol.Usage // of each assistant message, in order
	}{
		{openAI, "openai_multistep.txt", []*protocol.Usage{
			{InputTokens: 120, OutputTokens: 12}, nil, {InputTokens: 180, OutputTokens: 7, CachedInputTokens: 128}}},
		{anthropic, "anthropic_multistep.txt", []*protocol.Usage{
			{InputTokens: 10, OutputTokens: 20}, {InputTokens: 10, OutputTokens: 20}, {InputTokens: 45, OutputTokens: 20, CachedInputTokens: 30}}},
	} {
		t.Run(tc.p.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			sub := f.s.Subscribe(f.s.LastSeq())
			defer sub.Close()
			start := time.Now()
			wantReason(t, f.turn("what do my notes say?"), protocol.TurnCompleted, "")
			wall := time.Since(start).Milliseconds()
			if tc.p.name == "openai" {
				opts, _ := f.stub.request(0)["stream_options"].(map[string]any)
				if opts["include_usage"] != true {
					t.Fatalf("stream_options %v, want include_usage", f.stub.request(0)["stream_options"])
				}
			}
			// As journaled: the events, encoded and decoded again.
			var got []*protocol.Usage
			ctx := testutil.Context(t)
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := ev.Msg.(*protocol.TurnEnded); ok {
					break
				}
				cm, ok := ev.Msg.(*protocol.ConversationMessage)
				if !ok {
					continue
				}
				b, err := protocol.EncodeFrame(&protocol.Frame{Seq: ev.Seq, Msg: cm})
				if err != nil {
					t.Fatal(err)
				}
				fr, err := protocol.DecodeFrame(b)
				if err != nil {
					t.Fatalf("decode %s: %v", b, err)
				}
				m := fr.Msg.(*protocol.ConversationMessage).Message
				if m.DurationMs < 0 || m.DurationMs > wall {
					t.Fatalf("%s message took %d ms, in a turn of %d ms", m.Role, m.DurationMs, wall)
				}
				if m.Role == protocol.RoleAssistant {
					got = append(got, m.Usage)
				} else if m.Usage != nil {
					t.Fatalf("a %s message has usage %+v", m.Role, m.Usage)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d assistant messages, want %d", len(got), len(tc.want))
			}
			for i := range got {
				g, _ := json.Marshal(got[i])
				w, _ := json.Marshal(tc.want[i])
				if string(g) != string(w) {
					t.Errorf("step %d: usage %s, want %s", i+1, g, w)
				}
			}
			// The conversation holds them too.
			n := 0
			for _, e := range f.s.Conversation() {
				if e.Message.Role == protocol.RoleAssistant {
					g, _ := json.Marshal(e.Message.Usage)
					w, _ := json.Marshal(tc.want[n])
					if string(g) != string(w) {
						t.Errorf("conversation step %d: usage %s, want %s", n+1, g, w)
					}
					n++
				}
			}
		})
	}
}
