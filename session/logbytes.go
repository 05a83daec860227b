package session

import "github.com/brainrt/brain/protocol"

// DefaultLogMemoryBytes is the default of Options.LogMemoryBytes for a
// session with a History: what its latest events may hold in memory of
// the values peers and models chose. Without it a journaled session's 32
// events in memory could hold 32 MiB (each event up to MaxEventBytes, 1
// MiB); with it a session holds at most about this plus its newest event,
// and a subscriber behind reads the rest back from the store, as it does
// behind the 32.
const DefaultLogMemoryBytes = 1 << 20

// evictForBytes takes the oldest events in memory out of the ring — their
// messages dropped, their seqs kept — until the rest hold no more than
// the budget, the newest always staying. Those events are then read back
// from the session's History, like the ones behind keep (Subscription's
// tryNext: inMemory is past them). Called by appendLocked.
func (l *eventLog) evictForBytes() {
	for l.held > l.budget {
		seq := l.inMemory()
		if seq >= l.last {
			return
		}
		i := (seq - l.first) % l.keep
		l.held -= int(l.ring[i].bytes)
		l.ring[i] = entry{seq: seq}
		l.floor = seq + 1
	}
}

// eventValueBytes estimates what event e holds in memory beyond its fixed
// fields: the bytes of the values and texts a peer or a model chose — a
// call's input and result, props, a registration's schemas and
// description, a message's text — which are what make an event large
// (each bounded by Options.MaxEventBytes). Ids, names and the other
// small fields are not counted.
func eventValueBytes(e *entry) int {
	if e.msg == nil && e.call != nil { // a session without a journal keeps the call
		c := e.call
		if e.typ == protocol.TypeCapabilityOutcome {
			return outcomeBytes(&c.outcome)
		}
		return len(c.input)
	}
	switch m := e.msg.(type) {
	case *protocol.CapabilityInvoked:
		return len(m.Input)
	case *protocol.RenderInvoked:
		return len(m.Props)
	case *protocol.ApprovalRequested:
		return len(m.Input)
	case *protocol.ApprovalDecided:
		return len(m.Feedback)
	case *protocol.CapabilityOutcome:
		return outcomeBytes(&m.Outcome)
	case *protocol.CapabilityRegister:
		n := 0
		for i := range m.Capabilities {
			c := &m.Capabilities[i]
			n += len(c.Description) + len(c.InputSchema) + len(c.OutputSchema) + len(c.PromptFragment)
		}
		return n
	case *protocol.ConversationMessage:
		msg := &m.Message
		n := len(msg.Text)
		for _, tc := range msg.ToolCalls {
			n += len(tc.Input)
		}
		if msg.Outcome != nil {
			n += outcomeBytes(msg.Outcome)
		}
		return n
	case *protocol.AssistantDelta:
		return len(m.Text)
	case *protocol.TurnStarted:
		return len(m.Message)
	case *protocol.TurnEnded:
		return len(m.Error)
	}
	return 0
}

// outcomeBytes is what an outcome holds: its value, or its error's
// message.
func outcomeBytes(o *protocol.Outcome) int {
	if o.Err != nil {
		return len(o.Err.Message)
	}
	return len(o.Value)
}
