package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// TestTurnGoldens: every turn and conversation message type has a fixture
// (TestGoldenRoundTrip round-trips them).
func TestTurnGoldens(t *testing.T) {
	for _, typ := range []protocol.Type{
		protocol.TypeTurnStart, protocol.TypeTurnEnd, protocol.TypeTurnCancel, protocol.TypeTurnStarted,
		protocol.TypeTurnEnded, protocol.TypeConversationMessage, protocol.TypeAssistantDelta,
	} {
		m, err := protocol.DecodeMessage([]byte(`{"type":"` + string(typ) + `"}`))
		if err != nil && strings.Contains(err.Error(), "unknown message type") {
			t.Errorf("%s is not registered in the codec: %v", typ, err)
		}
		_ = m
	}
}

func TestChatMessageValidate(t *testing.T) {
	ok := protocol.OK(json.RawMessage(`1`))
	tests := []struct {
		name string
		m    protocol.ChatMessage
		bad  string // "" = valid
	}{
		{"user", protocol.ChatMessage{Role: protocol.RoleUser, Text: "hi"}, ""},
		{"empty user", protocol.ChatMessage{Role: protocol.RoleUser}, "text only"},
		{"assistant with calls", protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "1", Name: "a", Input: json.RawMessage(`{}`)}}}, ""},
		{"call without id", protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{Name: "a", Input: json.RawMessage(`{}`)}}}, "toolCalls[0]"},
		{"call with bad input", protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "1", Name: "a", Input: json.RawMessage(`{`)}}}, "toolCalls[0]"},
		{"tool", protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: "1", Name: "a", Outcome: &ok}, ""},
		{"tool without outcome", protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: "1", Name: "a"}, "outcome"},
		{"unknown role", protocol.ChatMessage{Role: "system", Text: "x"}, `role "system"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Validate()
			switch {
			case tt.bad == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.bad)
			}
		})
	}
}

func TestTurnStartStrict(t *testing.T) {
	_, err := protocol.DecodeFrame([]byte(`{"v":2,"msg":{"type":"turn_start","mesage":"hi"}}`))
	if err == nil || !strings.Contains(err.Error(), `"mesage"`) {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}
