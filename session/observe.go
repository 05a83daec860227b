package session

import (
	"context"
	"time"

	"github.com/brainrt/brain/protocol"
)

// CallEventKind is a point in a call's life reported to [Options.Observe].
type CallEventKind int

// The points of a call's life, in the order a call passes them. A call
// reports CallStarted once it has passed validation and CallFinished exactly
// once; in between, ApprovalRequested and ApprovalDecided when its
// capability requires approval, and CallDispatched when it is handed to its
// owning peer or handler. A call restored from a journal ([Restore]) reports
// from where it resumed, without CallStarted. A call refused before it
// starts (not_found, forbidden, invalid_input) reports only CallFinished,
// with a call id of its own that no event carries.
const (
	CallStarted CallEventKind = iota + 1
	ApprovalRequested
	ApprovalDecided
	CallDispatched
	CallFinished
)

var callEventKindNames = [...]string{
	CallStarted:       "call_started",
	ApprovalRequested: "approval_requested",
	ApprovalDecided:   "approval_decided",
	CallDispatched:    "call_dispatched",
	CallFinished:      "call_finished",
}

// String returns the kind's snake_case name.
func (k CallEventKind) String() string {
	if k > 0 && int(k) < len(callEventKindNames) {
		return callEventKindNames[k]
	}
	return "unknown"
}

// CallEvent is one point of a call's life, for metrics and tracing.
type CallEvent struct {
	Kind    CallEventKind
	Session string
	CallID  string
	Name    string
	Origin  protocol.Origin
	Side    protocol.Side
	Invoker protocol.Audience
	Time    time.Time
	// Context is the invoker's context (a trace parent), for CallStarted
	// only; nil when the call was started without one ([Session.Start],
	// capability_invoke).
	Context context.Context
	// Decision is set for ApprovalDecided.
	Decision protocol.Decision
	// DecidedBy is set for ApprovalDecided: the authenticated peer, then
	// the frame's decidedBy in parentheses, "client (alice) (Alice Smith)".
	DecidedBy string
	// Outcome is set for CallFinished.
	Outcome protocol.Outcome
}

// observe reports a point of c's life to Options.Observe. It must not be
// called with s.mu held. fill, if set, adds the kind's own fields; it works
// on a copy, so that the event stays off the heap.
func (s *Session) observe(kind CallEventKind, c *call, fill func(CallEvent) CallEvent) {
	o := s.opts.Observe
	if o == nil {
		return
	}
	ev := CallEvent{Kind: kind, Session: s.id, CallID: c.id, Name: c.name, Invoker: c.invoker, Time: time.Now(),
		Origin: c.origin, Side: c.side}
	if fill != nil {
		ev = fill(ev)
	}
	o(ev)
}
