package session

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/brainrt/brain/protocol"
)

// Events and their size. A journal stores each event as one message, and
// a store refuses a message over its limit (JetStream's max payload, 1 MiB
// by default). An event that reaches a peer but not the journal breaks
// journaled-before-visible: a restart would show less than peers saw. So
// every input that becomes part of an event is bounded before anything is
// visible — a call's input and its result, props, model text, a
// registration, feedback and reasons — and what is over is refused with
// too_large, naming the limit. A journal that refuses an event anyway
// ([EventTooLargeError]) stays appendable: the event is replaced by a
// smaller one that says what happened, or dropped before anyone sees it.

// DefaultMaxEventBytes is the default of Options.MaxEventBytes: JetStream's
// default max payload, 1 MiB, less room for the message's headers.
const DefaultMaxEventBytes = 1<<20 - 1<<10

// eventHeadroom is what an event holds beside its largest value — ids, a
// name, digests, an error message — so that a value (an input, a result,
// props) may take the rest of MaxEventBytes.
const eventHeadroom = 16 << 10

// MaxTextBytes bounds the texts peers put into events beside a value:
// an approval's feedback, a cancellation's reason, an error result's
// message (which is cut there, marked, rather than refused: a call must
// end).
const MaxTextBytes = 8 << 10

// EventTooLargeError is what a [Journal] returns for an event it cannot
// store because of its size, before storing anything: the journal is
// unchanged, and its next Append may carry the same seq.
type EventTooLargeError struct {
	Type  protocol.Type
	Size  int // the event's encoded size
	Limit int // the most the journal stores
}

func (e *EventTooLargeError) Error() string {
	return fmt.Sprintf("a %s event of %d bytes is over the journal's limit of %d bytes", e.Type, e.Size, e.Limit)
}

// ErrorCode makes the error a too_large one.
func (e *EventTooLargeError) ErrorCode() protocol.Code { return protocol.CodeTooLarge }

// EncodedSize returns how many bytes raw takes inside an event: what
// encoding/json writes for it, which escapes <, > and & as \u003c (six
// bytes for one) and U+2028, U+2029 as \u2028 (six for three). It is an
// upper bound: whitespace, which the encoding drops, is counted.
func EncodedSize(raw []byte) int {
	n := len(raw)
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '<', '>', '&':
			n += 5
		case 0xe2: // U+2028 and U+2029 are e2 80 a8 and e2 80 a9
			if i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xa8 || raw[i+2] == 0xa9) {
				n += 3
			}
		}
	}
	return n
}

// valueLimit is the most an input, a result or props may take in an
// event, as [EncodedSize] counts it.
func (s *Session) valueLimit() int { return s.opts.MaxEventBytes - eventHeadroom }

// tooLarge is the error of a value over the limit: what, its size, the
// limit and where it comes from.
func (s *Session) tooLarge(what string, size int) *protocol.Error {
	return protocol.Errorf(protocol.CodeTooLarge, "%s is %d bytes as JSON in an event, over the limit of %d bytes (an event must fit the session's journal: Options.MaxEventBytes %d, less %d for the rest of the event)",
		what, size, s.valueLimit(), s.opts.MaxEventBytes, eventHeadroom)
}

// checkValue refuses a value over the limit; what names it in the error,
// as "<what> %q" of name when name is not empty (formatted only then: the
// check runs on every call and result).
func (s *Session) checkValue(what, name string, v []byte) *protocol.Error {
	if n := EncodedSize(v); n > s.valueLimit() {
		if name != "" {
			what = fmt.Sprintf("%s %q", what, name)
		}
		return s.tooLarge(what, n)
	}
	return nil
}

// checkEvent refuses a message whose encoding is over MaxEventBytes, for
// the events built from many inputs (a registration, a conversation
// message): it encodes m, so it is for paths that are not per call.
func (s *Session) checkEvent(what string, m protocol.Message) *protocol.Error {
	b, err := protocol.EncodeMessage(m)
	if err != nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, "%s does not encode: %v", what, err)
	}
	if len(b)+64 > s.opts.MaxEventBytes { // 64: the frame's envelope, v and seq
		return protocol.Errorf(protocol.CodeTooLarge, "%s is %d bytes as an event, over the limit of %d bytes (an event must fit the session's journal: Options.MaxEventBytes)",
			what, len(b)+64, s.opts.MaxEventBytes)
	}
	return nil
}

// boundOutcome returns out, or a too_large error in place of a value over
// the limit; an error message over MaxTextBytes is cut.
func (s *Session) boundOutcome(name string, out protocol.Outcome) protocol.Outcome {
	if out.Err != nil {
		if len(out.Err.Message) > MaxTextBytes {
			e := *out.Err
			e.Message = cutText(e.Message, MaxTextBytes) + " …(cut at 8 KiB)"
			out.Err = &e
		}
		return out
	}
	if n := EncodedSize(out.Value); n > s.valueLimit() {
		return protocol.Outcome{Err: s.tooLarge(fmt.Sprintf("the result of %s", quoteName(name)), n)}
	}
	return out
}

// cutText returns at most n bytes of t, cut at a rune boundary.
func cutText(t string, n int) string {
	if len(t) <= n {
		return t
	}
	for n > 0 && !utf8.RuneStart(t[n]) {
		n--
	}
	return t[:n]
}

// quoteName quotes a name for a message, cut when it is longer than a
// name may be (a model may send anything).
func quoteName(name string) string {
	if len(name) > protocol.MaxNameBytes {
		return fmt.Sprintf("%q… (%d bytes)", cutText(name, 64), len(name))
	}
	return fmt.Sprintf("%q", name)
}

// substitute returns the event that replaces e when the journal refused e
// for its size: a call's outcome becomes a too_large error (and so the
// call's outcome, when the call is finishing with it), a conversation
// message says its content was dropped. Anything else has no substitute
// (nil): the inputs of those events are bounded before they are emitted,
// and one that is still too large is dropped before anyone sees it.
func (s *Session) substitute(e entry, tl *EventTooLargeError) protocol.Message {
	switch m := e.msg.(type) {
	case *protocol.CapabilityOutcome:
		out := protocol.Outcome{Err: protocol.Errorf(protocol.CodeTooLarge, "the outcome of %s was %d bytes as an event, over the journal's limit of %d bytes; it was dropped",
			quoteName(m.Name), tl.Size, tl.Limit)}
		if e.call != nil {
			e.call.outcome = out
		}
		return &protocol.CapabilityOutcome{CallID: m.CallID, Name: cutText(m.Name, protocol.MaxNameBytes), Outcome: out}
	case *protocol.ConversationMessage:
		note := fmt.Sprintf("[this message was %d bytes as an event, over the journal's limit of %d bytes; it was dropped]", tl.Size, tl.Limit)
		c := protocol.ChatMessage{Role: m.Message.Role, Text: note}
		if m.Message.Role == protocol.RoleTool {
			c = protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: m.Message.ToolCallID, Name: cutText(m.Message.Name, protocol.MaxNameBytes),
				Outcome: &protocol.Outcome{Err: protocol.Errorf(protocol.CodeTooLarge, "%s", note)}}
		}
		return &protocol.ConversationMessage{Turn: m.Turn, Message: c}
	}
	return nil
}

// journalTooLarge reports whether err is a journal's refusal of an event
// for its size.
func journalTooLarge(err error) (*EventTooLargeError, bool) {
	var tl *EventTooLargeError
	ok := errors.As(err, &tl)
	return tl, ok
}
