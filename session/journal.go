package session

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/brainrt/brain/protocol"
)

// Journal persists a session's events. Append is called for every event, in
// seq order, before any subscriber can read it, with the session's lock
// held: a journal must be quick, and must not call back into the session.
// Replaying what a journal stored with [Restore] rebuilds the session.
type Journal interface {
	Append(e Event) error
}

// emitLocked gives an event the next seq, journals it, and makes it
// visible to subscribers.
func (s *Session) emitLocked(e entry) {
	if j := s.opts.Journal; j != nil {
		seq := s.events.last + 1
		if err := j.Append(Event{Seq: seq, Msg: e.message()}); err != nil {
			// The event still happens in memory: refusing it here would
			// leave calls without outcomes. The log says what a restart
			// would lose.
			s.logError("journal append failed", slog.Uint64("seq", seq), slog.String("type", string(e.typ)), slog.String("error", err.Error()))
		}
	}
	s.events.appendLocked(e)
}

// Restore rebuilds a session from the events its journal stored (in seq
// order, starting at 1 or at any later seq the journal kept):
//
//   - client and app registrations come back as they were; registrations of
//     the runtime (agent, flow, skill, mcp, connector, mount) hold Go
//     handlers that no journal can store, so reattach — called after the
//     registrations are rebuilt and before pending calls resume — must
//     register them again (an environment re-attaching its tools);
//   - a call awaiting approval waits again, and can still be approved or
//     rejected; a client- or app-side call already dispatched waits again for
//     its result, with a fresh timeout; an agent-side call that was running
//     ends with code internal, since its handler died with the process;
//   - the event log holds the replayed events, so a subscriber resuming from
//     its last seq misses nothing; new events continue the seq.
//
// The restored session journals to opts.Journal like any other.
func Restore(id string, events []Event, opts *Options, reattach func(*Session) error) (*Session, error) {
	o := opts.withDefaults()
	journal := o.Journal
	o.Journal = nil // replaying must not append again
	s := New(id, &o)
	type pending struct {
		id, name string
		input    []byte
		invoker  protocol.Audience
		approval bool // still awaiting approval
		invoked  bool
	}
	var calls []*pending
	byID := map[string]*pending{}
	for i, e := range events {
		if e.Seq != s.events.last+1 && !(i == 0 && e.Seq > 0) {
			return nil, fmt.Errorf("restore session %q: event %d has seq %d after %d", id, i, e.Seq, s.events.last)
		}
		s.mu.Lock()
		s.events.last = e.Seq - 1
		switch m := e.Msg.(type) {
		case *protocol.CapabilityRegister:
			for _, c := range m.Capabilities {
				if p, ok := ownerOf(c.Origin); ok {
					if r, err := s.prepare(p, c, nil); err == nil {
						s.caps[c.Name] = r
					}
				}
			}
		case *protocol.CapabilityDeregister:
			for _, n := range m.Names {
				if r, ok := s.caps[n]; ok && r.cap.Origin.Kind != protocol.OriginFramework {
					delete(s.caps, n)
				}
			}
		case *protocol.ApprovalRequested:
			p := &pending{id: m.CallID, name: m.Name, input: m.Input, invoker: m.Invoker, approval: true}
			calls, byID[m.CallID] = append(calls, p), p
		case *protocol.CapabilityInvoked:
			if p := byID[m.CallID]; p != nil {
				p.approval, p.invoked = false, true
			} else {
				p := &pending{id: m.CallID, name: m.Name, input: m.Input, invoker: protocol.AudienceLLM, invoked: true}
				calls, byID[m.CallID] = append(calls, p), p
			}
		case *protocol.CapabilityOutcome:
			if p := byID[m.CallID]; p != nil {
				delete(byID, m.CallID)
				calls = slices.DeleteFunc(calls, func(q *pending) bool { return q == p })
			}
			s.rememberFinishedLocked(m.CallID, m.Outcome)
		}
		s.events.appendLocked(entry{typ: e.Msg.MessageType(), msg: e.Msg})
		s.mu.Unlock()
	}
	s.opts.Journal = journal
	if reattach != nil {
		if err := reattach(s); err != nil {
			return nil, fmt.Errorf("restore session %q: reattach: %w", id, err)
		}
	}
	for _, p := range calls {
		s.resume(p.id, p.name, p.input, p.invoker, p.approval)
	}
	return s, nil
}

// ownerOf returns the peer that registers origin o, for the origins a
// journal can restore (client and app).
func ownerOf(o protocol.Origin) (Peer, bool) {
	switch o.Kind {
	case protocol.OriginClient:
		return Client, true
	case protocol.OriginApp:
		return App(o.ID), true
	}
	return Peer{}, false
}

// resume brings back one call that was pending when the session was
// journaled.
func (s *Session) resume(id, name string, input []byte, invoker protocol.Audience, awaitingApproval bool) {
	s.mu.Lock()
	r := s.caps[name]
	s.mu.Unlock()
	c := &call{id: id, name: name, input: input, invoker: invoker, reg: r, done: make(chan struct{})}
	if r == nil {
		c.reg = &registration{logKey: "capability:?:" + name, timeout: s.opts.DefaultCallTimeout}
	}
	s.mu.Lock()
	s.calls[id] = c
	s.mu.Unlock()
	switch {
	case r == nil:
		s.finish(c, protocol.Fail(protocol.CodeInternal, "the kernel restarted and the capability %q is no longer registered", name))
	case awaitingApproval && r.cap.RequiresApproval:
		c.awaitingApproval, c.resumed = true, true
		c.approval = make(chan protocol.CapabilityApprove, 1)
		go s.run(context.Background(), c)
	case !awaitingApproval && r.handler == nil:
		c.dispatched, c.resumed = true, true
		go s.run(context.Background(), c)
	default:
		s.finish(c, protocol.Fail(protocol.CodeInternal, "the kernel restarted while %q was running; it may or may not have taken effect", name))
	}
}
