package driver

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// TestWellFormed: wellFormed says exactly when repair changes nothing, on
// named cases and on random conversations of user, assistant and tool
// messages (ids drawn from a few, so that answers go astray, repeat and go
// missing).
func TestWellFormed(t *testing.T) {
	ok := protocol.OK(json.RawMessage(`{}`))
	user := protocol.ChatMessage{Role: protocol.RoleUser, Text: "hi"}
	text := protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "done"}
	calls := func(ids ...string) protocol.ChatMessage {
		m := protocol.ChatMessage{Role: protocol.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, protocol.ToolCall{ID: id, Name: "t", Input: json.RawMessage(`{}`)})
		}
		return m
	}
	result := func(id string) protocol.ChatMessage {
		return protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: id, Name: "t", Outcome: &ok}
	}
	answered := func(n int) []protocol.ChatMessage { // n calls, all answered
		ids := make([]string, n)
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		out := []protocol.ChatMessage{calls(ids...)}
		for _, id := range ids {
			out = append(out, result(id))
		}
		return out
	}
	for _, tt := range []struct {
		name string
		msgs []protocol.ChatMessage
		want bool
	}{
		{"empty", nil, true},
		{"a turn without calls", []protocol.ChatMessage{user, text}, true},
		{"calls answered in any order", []protocol.ChatMessage{user, calls("a", "b"), result("b"), result("a"), text}, true},
		{"the same id twice, answered twice", []protocol.ChatMessage{user, calls("a", "a"), result("a"), result("a"), text}, true},
		{"an unanswered call before the next user message", []protocol.ChatMessage{user, calls("a", "b"), result("a"), user}, false},
		{"an unanswered call at the end", []protocol.ChatMessage{user, calls("a")}, false},
		{"a result answering nothing", []protocol.ChatMessage{user, result("a"), text}, false},
		{"a result answered twice", []protocol.ChatMessage{user, calls("a"), result("a"), result("a")}, false},
		{"a result of an earlier message", []protocol.ChatMessage{calls("a"), result("a"), calls("b"), result("a"), result("b")}, false},
		{"64 calls answered", answered(64), true},
		{"65 calls answered: left to repair", answered(65), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := wellFormed(tt.msgs); got != tt.want {
				t.Fatalf("wellFormed = %v, want %v", got, tt.want)
			}
			if tt.want && !reflect.DeepEqual(repair(tt.msgs, 0), append([]protocol.ChatMessage{}, tt.msgs...)) {
				t.Fatal("repair changed a well-formed conversation")
			}
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "c"}
	for i := range 20000 {
		var msgs []protocol.ChatMessage
		for range rng.IntN(8) {
			switch rng.IntN(4) {
			case 0:
				msgs = append(msgs, user)
			case 1:
				n := rng.IntN(3)
				var cs []string
				for range n {
					cs = append(cs, ids[rng.IntN(len(ids))])
				}
				if n == 0 {
					msgs = append(msgs, text)
				} else {
					msgs = append(msgs, calls(cs...))
				}
			default:
				msgs = append(msgs, result(ids[rng.IntN(len(ids))]))
			}
		}
		unchanged := reflect.DeepEqual(repair(msgs, 0), append(make([]protocol.ChatMessage, 0, len(msgs)), msgs...))
		if got := wellFormed(msgs); got != unchanged {
			t.Fatalf("case %d: wellFormed = %v, but repair changes it: %v\n%+v", i, got, !unchanged, msgs)
		}
	}
}
