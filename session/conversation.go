package session

import (
	"slices"
	"sort"

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

// TurnRecord is one turn of a session's conversation: who started it and
// how it ended, as its turn_started and turn_ended events said. A turn
// ended without being started (an implicit one, see [Session.EndTurn])
// has no Seq nor StartedBy; a running turn has no Reason nor EndSeq.
type TurnRecord struct {
	Turn      int                 `json:"turn"`
	Seq       uint64              `json:"seq,omitempty"` // of its turn_started
	StartedBy string              `json:"startedBy,omitempty"`
	Reason    protocol.TurnReason `json:"reason,omitempty"`
	Error     string              `json:"error,omitempty"`
	EndSeq    uint64              `json:"endSeq,omitempty"` // of its turn_ended
}

// StreamedText is the assistant text the model has streamed so far in the
// running turn's current step: the assistant_delta events since the
// step's last message, joined. Seq is the last of them: a reader that
// then follows the events appends the deltas after Seq.
type StreamedText struct {
	Turn int    `json:"turn"`
	Seq  uint64 `json:"seq"`
	Text string `json:"text"`
}

// ConversationState is the conversation as of one event, Seq (the
// session's latest when it was read): what GET
// /v1/sessions/{id}/conversation answers. Turn and Running are the latest
// turn ([Session.CurrentTurn]); Messages those of [Session.Conversation]
// (after a seq, if asked); Turns the records of the turns (those that
// started or ended after that seq, and a running one); Streaming the text
// the running step has streamed so far (nil when none). A reader that
// resumes the events after Seq misses nothing and sees nothing twice.
type ConversationState struct {
	Seq       uint64              `json:"seq"`
	Turn      int                 `json:"turn"`
	Running   bool                `json:"running"`
	Messages  []ConversationEntry `json:"messages"`
	Turns     []TurnRecord        `json:"turns"`
	Streaming *StreamedText       `json:"streaming,omitempty"`
}

// ConversationAfter returns the conversation as of the session's latest
// event, with the messages added, and the turns started or ended, after
// seq after (0: all of them), and the running turn. The result is a copy.
func (s *Session) ConversationAfter(after uint64) ConversationState {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.turns
	st := ConversationState{Seq: s.events.last, Turn: s.turn, Running: t.active, Turns: []TurnRecord{}}
	i := sort.Search(len(t.meta), func(i int) bool { return t.meta[i].seq > after })
	st.Messages = make([]ConversationEntry, 0, len(t.msgs)-i)
	for ; i < len(t.msgs); i++ {
		st.Messages = append(st.Messages, ConversationEntry{Seq: t.meta[i].seq, Turn: t.meta[i].turn, Message: cloneChatMessage(t.msgs[i])})
	}
	// Records are in turn order, and a turn's events come after the
	// earlier turns': from the end back to the first one wholly before.
	j := len(t.records)
	for j > 0 {
		r := t.records[j-1]
		if r.Seq <= after && r.EndSeq <= after && r.Reason != "" {
			break
		}
		j--
	}
	st.Turns = append(st.Turns, t.records[j:]...)
	if t.active && len(t.streamed) > 0 {
		st.Streaming = &StreamedText{Turn: s.turn, Seq: t.streamedSeq, Text: string(t.streamed)}
	}
	return st
}

// Turns returns the records of the session's turns, in order. They
// survive a restart (rebuilt from the journaled turn events). The result
// is a copy.
func (s *Session) Turns() []TurnRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.turns.records)
}

// startedLocked records turn n, started by who with event seq.
func (t *turnState) startedLocked(seq uint64, n int, who string) {
	t.streamed, t.streamedSeq = t.streamed[:0], 0
	if k := len(t.records); k > 0 && t.records[k-1].Turn >= n {
		return // a journal that says it twice
	}
	t.records = append(t.records, TurnRecord{Turn: n, Seq: seq, StartedBy: who})
}

// endedLocked records the end of a turn (event seq), which ends an
// implicit turn when it was never started.
func (t *turnState) endedLocked(seq uint64, m *protocol.TurnEnded) {
	t.streamed, t.streamedSeq = nil, 0
	k := len(t.records)
	if k == 0 || t.records[k-1].Turn < m.Turn {
		t.records = append(t.records, TurnRecord{Turn: m.Turn})
		k++
	}
	r := &t.records[k-1]
	if r.Turn != m.Turn {
		return // not the latest turn: a journal out of order
	}
	r.Reason, r.Error, r.EndSeq = m.Reason, m.Error, seq
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
	if m.Role == protocol.RoleAssistant { // the step's whole text: what streamed is in it
		s.turns.streamed, s.turns.streamedSeq = s.turns.streamed[:0], 0
	}
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
	s.turns.streamed = append(s.turns.streamed, text...)
	s.turns.streamedSeq = s.events.last
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
