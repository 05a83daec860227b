package session

import (
	"slices"

	"github.com/brainrt/brain/protocol"
)

// ConversationEntry is one message of a session's conversation: the turn it
// belongs to and the seq of the conversation_message event that added it.
type ConversationEntry struct {
	Seq     uint64               `json:"seq"`
	Turn    int                  `json:"turn"`
	Message protocol.ChatMessage `json:"message"`
}

// Conversation returns the session's conversation in order: user messages,
// assistant messages with their tool calls, and tool results. It survives a
// restart (the messages are journaled). The result is a copy.
func (s *Session) Conversation() []ConversationEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConversationEntry, len(s.turns.msgs))
	for i, m := range s.turns.msgs {
		out[i] = ConversationEntry{Seq: s.turns.meta[i].seq, Turn: s.turns.meta[i].turn, Message: cloneChatMessage(m)}
	}
	return out
}

// ConversationMessages returns the messages of [Session.Conversation]
// without copying them, and the distinct tool names they mention (of tool
// calls and tool results, in the order they first appeared): the
// messages, their tool calls and outcomes are the session's own, which it
// never modifies once added (what is added later does not appear in the
// slices returned, and appending to them copies them). Read them, never
// modify them. It is for a caller that reads the whole conversation at
// every model step (a turn runner), for which copying every message, or
// collecting its tool names, was most of the cost of a step.
func (s *Session) ConversationMessages() (msgs []protocol.ChatMessage, toolNames []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, k := len(s.turns.msgs), len(s.turns.toolNames)
	return s.turns.msgs[:n:n], s.turns.toolNames[:k:k]
}

// AppendMessage adds m to the conversation during turn, which must be the
// running turn: a runner's late message after its turn was ended elsewhere
// is refused (conflict) and changes nothing. An invalid message is
// invalid_request. One conversation_message event carries it.
func (s *Session) AppendMessage(turn int, m protocol.ChatMessage) error {
	return s.appendMessage(turn, m, true)
}

// AppendOwnedMessage is [Session.AppendMessage] for a caller that hands m
// over: the session keeps m's tool calls, their inputs and its outcome as
// they are, without copying them, so the caller must never modify them
// afterwards, nor pass in anything it does not own (a turn runner's own
// messages, built for this call: package driver's).
func (s *Session) AppendOwnedMessage(turn int, m protocol.ChatMessage) error {
	return s.appendMessage(turn, m, false)
}

func (s *Session) appendMessage(turn int, m protocol.ChatMessage, clone bool) error {
	if err := m.Validate(); err != nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, "conversation message: %v", err)
	}
	if err := s.checkEvent("the conversation message", &protocol.ConversationMessage{Turn: turn, Message: m}); err != nil {
		return err
	}
	if clone {
		m = cloneChatMessage(m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.turns.active || s.turn != turn {
		return protocol.Errorf(protocol.CodeConflict, "turn %d is not running; the message was not added", turn)
	}
	s.appendMessageLocked(turn, m)
	return nil
}

func (s *Session) appendMessageLocked(turn int, m protocol.ChatMessage) {
	s.emitLocked(entry{typ: protocol.TypeConversationMessage, msg: &protocol.ConversationMessage{Turn: turn, Message: m}})
	s.turns.addLocked(s.events.last, turn, m)
}

func (t *turnState) addLocked(seq uint64, turn int, m protocol.ChatMessage) {
	t.msgs = append(t.msgs, m)
	t.meta = append(t.meta, messageMeta{seq: seq, turn: turn})
	for i := range m.ToolCalls {
		t.noteToolName(m.ToolCalls[i].Name)
	}
	if m.Role == protocol.RoleTool {
		t.noteToolName(m.Name)
	}
}

func (t *turnState) noteToolName(n string) {
	if _, ok := t.toolNameSet[n]; ok {
		return
	}
	if t.toolNameSet == nil {
		t.toolNameSet = map[string]struct{}{}
	}
	t.toolNameSet[n] = struct{}{}
	t.toolNames = append(t.toolNames, n)
}

// StreamText publishes a piece of assistant text while the model streams
// it (an assistant_delta event). It reports false, publishing nothing, when
// turn is not running. The whole text is added afterwards with
// [Session.AppendMessage].
func (s *Session) StreamText(turn int, text string) bool {
	if text == "" {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.turns.active || s.turn != turn {
		return false
	}
	s.emitLocked(entry{typ: protocol.TypeAssistantDelta, msg: &protocol.AssistantDelta{Turn: turn, Text: text}})
	return true
}

func cloneChatMessage(m protocol.ChatMessage) protocol.ChatMessage {
	if m.ToolCalls != nil {
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for i := range m.ToolCalls {
			m.ToolCalls[i].Input = slices.Clone(m.ToolCalls[i].Input)
		}
	}
	if m.Outcome != nil {
		o := *m.Outcome
		o.Value = slices.Clone(o.Value)
		if o.Err != nil {
			e := *o.Err
			o.Err = &e
		}
		m.Outcome = &o
	}
	if m.Usage != nil {
		u := *m.Usage
		m.Usage = &u
	}
	return m
}
