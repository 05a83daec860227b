package session_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestAppendOwnedMessage: a handed-over message is added, refused and
// announced exactly as AppendMessage's, and ConversationMessages reads the
// same conversation as Conversation, without what is added later.
func TestAppendOwnedMessage(t *testing.T) {
	s := session.New("owned", nil)
	turn, err := s.StartTurn(session.Runtime, "hi")
	if err != nil {
		t.Fatal(err)
	}
	out := protocol.OK(json.RawMessage(`{"n":1}`))
	call := protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "x.y", Input: json.RawMessage(`{}`)}}}
	result := protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: "c1", Name: "x.y", Outcome: &out}
	for _, tt := range []struct {
		name   string
		turn   int
		msg    protocol.ChatMessage
		code   protocol.Code // "" when added
		append func(int, protocol.ChatMessage) error
	}{
		{"a tool call", turn, call, "", s.AppendOwnedMessage},
		{"its result", turn, result, "", s.AppendOwnedMessage},
		{"invalid input", turn, protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "c2", Name: "x.y", Input: json.RawMessage(`{`)}}}, protocol.CodeInvalidRequest, s.AppendOwnedMessage},
		{"no role", turn, protocol.ChatMessage{Text: "x"}, protocol.CodeInvalidRequest, s.AppendOwnedMessage},
		{"another turn", turn + 1, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "late"}, protocol.CodeConflict, s.AppendOwnedMessage},
		{"copied, the same way", turn, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "done"}, "", s.AppendMessage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, n := s.LastSeq(), len(s.Conversation())
			err := tt.append(tt.turn, tt.msg)
			if tt.code != "" {
				wantErrCode(t, err, tt.code)
				if s.LastSeq() != before || len(s.Conversation()) != n {
					t.Fatal("a refused message changed the session")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			evs := eventsAfter(t, s, before)
			if len(evs) != 1 {
				t.Fatalf("%d events, want one conversation_message", len(evs))
			}
			if m, ok := evs[0].Msg.(*protocol.ConversationMessage); !ok || m.Turn != tt.turn || !reflect.DeepEqual(m.Message, tt.msg) {
				t.Fatalf("event %T %+v", evs[0].Msg, evs[0].Msg)
			}
		})
	}
	shared, names := s.ConversationMessages()
	if !slices.Equal(names, []string{"x.y"}) {
		t.Fatalf("tool names %q, want [x.y]", names)
	}
	var msgs []protocol.ChatMessage
	for _, e := range s.Conversation() {
		msgs = append(msgs, e.Message)
	}
	if !reflect.DeepEqual(shared, msgs) || len(shared) != 4 {
		t.Fatalf("ConversationMessages %+v\nConversation %+v", shared, msgs)
	}
	if shared[2].Outcome != &out {
		t.Fatal("the handed-over outcome was copied")
	}
	if err := s.AppendOwnedMessage(turn, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "more"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendOwnedMessage(turn, protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "c3", Name: "z", Input: json.RawMessage(`{}`)}, {ID: "c4", Name: "x.y", Input: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	now, nowNames := s.ConversationMessages()
	if !slices.Equal(nowNames, []string{"x.y", "z"}) || len(names) != 1 || cap(names) != 1 {
		t.Fatalf("tool names %q then %q (len %d, cap %d)", names, nowNames, len(names), cap(names))
	}
	if len(shared) != 4 || cap(shared) != 4 || len(now) != 6 {
		t.Fatalf("a later message reached an earlier ConversationMessages (len %d, cap %d)", len(shared), cap(shared))
	}
}
