package driver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/protocol"
)

// TestKeyNeverJournaled: a model that repeats its API key — split across
// two streamed pieces of text, and in a tool call's arguments — has the
// key taken out of everything the session journals and shows: the
// assistant deltas, the assistant's message, the call's input. Only
// provider errors were redacted before.
func TestKeyNeverJournaled(t *testing.T) {
	for _, p := range []struct {
		provider
		transcript string
	}{{openAI, "openai_echoes_key.txt"}, {anthropic, "anthropic_echoes_key.txt"}} {
		t.Run(p.name, func(t *testing.T) {
			f := newFixture(t, p.provider, p.transcript, nil)
			if ended := f.turn("what is your key?"); ended.Reason != protocol.TurnCompleted {
				t.Fatalf("turn ended %s: %s", ended.Reason, ended.Error)
			}
			journal := f.journal.text()
			if strings.Contains(journal, secretKey) || strings.Contains(journal, "SECRET-0123") {
				t.Fatalf("the key reached the journal:\n%s", journal)
			}
			if !strings.Contains(journal, "your key is [redacted], kept safe") {
				t.Fatalf("the assistant's text is not as redacted:\n%s", journal)
			}
			if !strings.Contains(journal, `"input":{"path":"[redacted]"}`) && !strings.Contains(journal, `"path":"[redacted]"`) {
				t.Fatalf("the call's input is not redacted:\n%s", journal)
			}
			var deltas strings.Builder
			for _, e := range f.journal.events {
				if d, ok := e.Msg.(*protocol.AssistantDelta); ok {
					deltas.WriteString(d.Text)
				}
			}
			if !strings.HasPrefix(deltas.String(), "your key is [redacted], kept safe") {
				t.Fatalf("the streamed deltas, joined: %q", deltas.String())
			}
		})
	}
}

// TestStreamBounds: a stream that sends nothing but keep-alives ends the
// turn with an error naming the idle timeout, and one that never ends,
// with an error naming the step timeout — instead of running until
// someone cancels the turn.
func TestStreamBounds(t *testing.T) {
	tests := []struct {
		name string
		opts driver.Options
		want string
	}{
		{"keep-alives only", driver.Options{IdleTimeout: 200 * time.Millisecond, StepTimeout: time.Minute}, "idle timeout (200ms)"},
		{"an answer that never ends", driver.Options{IdleTimeout: time.Minute, StepTimeout: 300 * time.Millisecond}, "step timeout (300ms)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, openAI, "openai_keepalive.txt", &tc.opts)
			ended := f.turn("think")
			if ended.Reason != protocol.TurnError || !strings.Contains(ended.Error, tc.want) {
				t.Fatalf("turn ended %s: %q, want an error naming %q", ended.Reason, ended.Error, tc.want)
			}
		})
	}
}

// TestHugeToolName: a model that calls a tool by a 300 KB name (the red
// team's hostile model server) gets not_found for it, the turn goes on,
// and every event the session journals stays small: the name is cut in
// messages, the journal keeps working for the next step.
func TestHugeToolName(t *testing.T) {
	name := strings.Repeat("n", 300_000)
	chunk := func(delta string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"stub-model","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	body := "-- response --\n\n" + chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"`+name+`","arguments":"{}"}}]}`) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1767225600,"model":"stub-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n" +
		"-- response --\n\n" + chunk(`{"role":"assistant","content":"sorry"}`) +
		`data: {"id":"c2","object":"chat.completion.chunk","created":1767225600,"model":"stub-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n"
	path := filepath.Join(t.TempDir(), "huge_name.txt")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, openAI, path, nil)
	if ended := f.turn("call it"); ended.Reason != protocol.TurnCompleted {
		t.Fatalf("turn ended %s: %s", ended.Reason, ended.Error)
	}
	f.journal.mu.Lock()
	defer f.journal.mu.Unlock()
	for _, fr := range f.journal.frames {
		if len(fr) > 400_000 {
			t.Fatalf("a journaled event of %d bytes: the name was not cut", len(fr))
		}
	}
	var tool *protocol.ChatMessage
	for _, e := range f.journal.events {
		if m, ok := e.Msg.(*protocol.ConversationMessage); ok && m.Message.Role == protocol.RoleTool {
			tool = &m.Message
		}
	}
	if tool == nil || tool.Outcome == nil || tool.Outcome.Err == nil || tool.Outcome.Err.Code != protocol.CodeNotFound {
		t.Fatalf("the tool's result: %+v, want not_found", tool)
	}
}
