package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/brainrt/brain/protocol"
)

// ErrJournalClosed is what a [Journal] returns (wrapped) once it takes no
// more events, such as when the process is stopping: the event is dropped
// before anyone sees it, and so is every later one. A stop is not an
// event: what happens in a stopping session in memory — a caller going
// away, its tools leaving — is never journaled, and the session is
// restored as it was.
var ErrJournalClosed = errors.New("session: the journal is closed")

// Journal persists a session's events. Append is called for every event, in
// seq order, before any subscriber can read it, with the session's lock
// held: a journal must be quick, and must not call back into the session.
// Replaying what a journal stored with [Restore] rebuilds the session.
type Journal interface {
	Append(e Event) error
}

// EventReader reads back events a journal stored (see Options.History).
// ReadEvents returns the events with after < Seq <= through, in seq
// order. It may return fewer than asked for (a journal that could not
// store some, or was trimmed); the session then gives its subscriber a
// snapshot instead. The events' Owner is the zero Peer: a journal does
// not record who owned a called capability. It is called without the
// session's lock held, and may block on the store for as long as ctx
// allows.
type EventReader interface {
	ReadEvents(ctx context.Context, after, through uint64) ([]Event, error)
}

// emitLocked gives an event the next seq, journals it, and makes it
// visible to subscribers.
func (s *Session) emitLocked(e entry) {
	if e.call != nil && e.owner == nil {
		e.owner = &e.call.reg.owner
	}
	if c := e.call; c != nil && c.emitted != nil { // its first event: Start waits for it
		defer c.firstEventOutLocked() // after the journal and the log, or a refusal
	}
	if j := s.opts.Journal; j != nil {
		seq := s.events.last + 1
		e.msg = e.message() // made once: the log keeps it for its subscribers
		if err := j.Append(Event{Seq: seq, Msg: e.msg}); err != nil {
			if errors.Is(err, ErrJournalClosed) {
				s.journalClosed = true
				s.logDebug("event dropped: the journal is closed", slog.Uint64("seq", seq), slog.String("type", string(e.typ)))
				return
			}
			if tl, ok := journalTooLarge(err); ok {
				if !s.replaceTooLargeLocked(j, seq, &e, tl) {
					return // never visible: the journal and the log stay the same
				}
			} else {
				// The event still happens in memory: refusing it here would
				// leave calls without outcomes. The log says what a restart
				// would lose.
				s.logError("journal append failed", slog.Uint64("seq", seq), slog.String("type", string(e.typ)), slog.String("error", err.Error()))
			}
		}
		// The log keeps the message, not the call it was made from: a
		// finished call holds its invoker's context, its channels and its
		// handler's copy, and a log keeps thousands of events.
		e.call = nil
	}
	s.events.appendLocked(e)
}

// replaceTooLargeLocked handles an event the journal refused for its
// size: it journals the event's substitute under the same seq in its
// place and reports true, or reports false when there is none (or it was
// refused too), and the event is dropped before anyone sees it.
func (s *Session) replaceTooLargeLocked(j Journal, seq uint64, e *entry, tl *EventTooLargeError) bool {
	sub := s.substitute(*e, tl)
	if sub == nil {
		s.logError("event dropped: too large for the journal", slog.Uint64("seq", seq), slog.String("type", string(e.typ)), slog.String("error", tl.Error()))
		return false
	}
	if err := j.Append(Event{Seq: seq, Msg: sub}); err != nil {
		s.logError("event dropped: too large for the journal, and its substitute was refused", slog.Uint64("seq", seq), slog.String("type", string(e.typ)), slog.String("error", err.Error()))
		return false
	}
	s.logError("event replaced: too large for the journal", slog.Uint64("seq", seq), slog.String("type", string(e.typ)), slog.String("error", tl.Error()))
	e.msg = sub
	return true
}

// emitDurableLocked is emitLocked for an event that must be journaled
// before it takes effect (a decision): it reports the journal's error, so
// that the caller can refuse to act on it. The event is in the log either
// way: a journal keeps a failed event and stores it before the next one,
// and the seqs must stay the journal's.
func (s *Session) emitDurableLocked(e entry) error {
	var err error
	if j := s.opts.Journal; j != nil {
		seq := s.events.last + 1
		e.msg = e.message()
		if err = j.Append(Event{Seq: seq, Msg: e.msg}); err != nil {
			s.logError("journal append failed", slog.Uint64("seq", seq), slog.String("type", string(e.typ)), slog.String("error", err.Error()))
			if _, ok := journalTooLarge(err); ok || errors.Is(err, ErrJournalClosed) {
				return err // refused, not kept: nothing to show
			}
		}
	}
	s.events.appendLocked(e)
	return err
}

// Restore rebuilds a session from the events its journal stored (in seq
// order, starting at 1 or at any later seq the journal kept):
//
//   - client and app registrations come back as they were; registrations of
//     the runtime (agent, flow, skill, mcp, connector, mount) hold Go
//     handlers that no journal can store, so reattach — called after the
//     registrations are rebuilt and before pending calls resume — must
//     register them again (an environment re-attaching its tools); doing
//     so with an unchanged definition emits nothing. Those not registered
//     again — by reattach, or within Options.PeerGrace by a peer (an
//     environment over a connection reconnecting) — are then ended by one
//     capability_deregister;
//   - a call awaiting approval waits again, and can still be approved or
//     rejected — unless the journal holds its decision, which is never
//     asked for or applied twice: an approved call that had not been
//     dispatched is dispatched now, a rejected one ends rejected; a call
//     whose capability is no longer registered as it was when the call was
//     made ends without running;
//   - a client- or app-side call already dispatched waits again for its
//     result, with a fresh timeout, for at most Options.PeerGrace unless
//     its owner reconnects; an agent-side call that was running ends with
//     code unavailable, since its handler died with the process (whether it
//     took effect is unknown, and the message says so);
//   - a render stream whose partials the journal holds, without its call
//     or its end, ends with a lone capability_outcome cancelled: the
//     stream died with the process (render_stream.go);
//   - a turn the journal shows running ends with reason interrupted, and
//     the model's calls still pending in it are cancelled (turn.go);
//   - the event log holds the replayed events, so a subscriber resuming from
//     its last seq misses nothing; new events continue the seq. A replayed
//     call event belongs to the owner of its capability at that point of
//     the journal (see [Event]).
//
// The restored session journals to opts.Journal like any other.
func Restore(id string, events []Event, opts *Options, reattach func(*Session) error) (*Session, error) {
	return RestoreFrom(id, nil, events, opts, reattach)
}

// RestoreFrom is [Restore] from a [Checkpoint] of the session's events up
// to cp.Seq and the events stored after it (from cp.Seq+1 on): the
// session comes back as Restore would bring it back from all of its
// events. cp may be nil (then it is Restore). A checkpoint that does not
// hold together (events out of order, a finished call naming no table
// entry) is an error naming what is wrong, and nothing is restored.
func RestoreFrom(id string, cp *Checkpoint, events []Event, opts *Options, reattach func(*Session) error) (*Session, error) {
	// New applies the defaults: given them applied already, it would take
	// the 0 a negative PeerGrace becomes for "unset".
	var o Options
	if opts != nil {
		o = *opts
	}
	journal := o.Journal
	o.Journal = nil // replaying must not append again
	s := New(id, &o)
	r := newReplay(s)
	if cp != nil {
		if err := r.checkpoint(cp); err != nil {
			return nil, fmt.Errorf("restore session %q: %w", id, err)
		}
	}
	for i, e := range events {
		if e.Msg == nil || e.Seq != s.events.last+1 && !(i == 0 && cp == nil && e.Seq > 0) {
			return nil, fmt.Errorf("restore session %q: event %d has seq %d after %d", id, i, e.Seq, s.events.last)
		}
		r.apply(e, true)
	}
	calls, streams, revs := r.calls, r.streams, r.revs
	s.mu.Lock()
	for name, rev := range revs {
		if _, ok := s.caps[name]; !ok {
			if s.journaled == nil {
				s.journaled = map[string]string{}
			}
			s.journaled[name] = rev
		}
	}
	// The owners of restored registrations have no connection yet.
	for _, r := range s.caps {
		if r.handler == nil {
			pr := s.presenceLocked(r.owner)
			if pr.timer == nil {
				s.goneLocked(party(r.owner), pr)
			}
		}
	}
	s.mu.Unlock()
	s.opts.Journal = journal
	for _, st := range streams {
		out := protocol.Fail(protocol.CodeCancelled, "the call to %q was never made: the session was restored (a restart, or another node took it over) while its props streamed", st.name)
		s.mu.Lock()
		s.rememberFinishedLocked(st.id, out, nil)
		s.emitLocked(entry{typ: protocol.TypeCapabilityOutcome, owner: st.owner,
			msg: &protocol.CapabilityOutcome{CallID: st.id, Name: st.name, Outcome: out}})
		s.mu.Unlock()
	}
	if reattach != nil {
		if err := reattach(s); err != nil {
			return nil, fmt.Errorf("restore session %q: reattach: %w", id, err)
		}
	}
	s.awaitUnattached()
	for _, p := range calls {
		s.resume(p)
	}
	s.endInterruptedTurn() // turn.go
	return s, nil
}

// awaitUnattached gives the registrations the journal holds that reattach
// did not make again PeerGrace to be made again — an environment over a
// connection (`brain env`) registers its tools once it reconnects — and
// then ends those still missing (deregisterUnattached).
func (s *Session) awaitUnattached() {
	s.mu.Lock()
	left := len(s.journaled)
	s.mu.Unlock()
	switch {
	case left == 0:
	case s.opts.PeerGrace <= 0:
		s.deregisterUnattached()
	default:
		time.AfterFunc(s.opts.PeerGrace, s.deregisterUnattached)
	}
}

// deregisterUnattached ends the registrations the journal holds that
// were not made again since the restore — a tool the restarted
// environment no longer has, an MCP server whose import failed, an
// environment that did not reconnect — with one capability_deregister,
// so that the log read from its start says what the registry holds
// (a live environment's tools leave with its connection the same way:
// server's ws.go). They were never installed (their handlers died with
// the process): nothing else changes. Made again unchanged, none is left
// and nothing is emitted. In a stopping process the journal is closed and
// the event is dropped (emitLocked): a stop is not an event.
func (s *Session) deregisterUnattached() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.journaled) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(s.journaled))
	s.journaled = nil
	s.logInfo("capabilities deregistered: not registered again after the restore", slog.Any("names", names))
	s.emitLocked(entry{typ: protocol.TypeCapabilityDeregister, msg: &protocol.CapabilityDeregister{Names: names}})
}

// restoredOwner returns the peer that registers origin o, for the origins
// a journal can restore (client and app).
func restoredOwner(o protocol.Origin) (Peer, bool) {
	switch o.Kind {
	case protocol.OriginClient:
		return Client, true
	case protocol.OriginApp:
		return App(o.ID), true
	}
	return Peer{}, false
}

// restoredCall is a call a journal holds as pending, as Restore reads it.
type restoredCall struct {
	id, name string
	input    []byte
	invoker  protocol.Audience
	rev      string // of the registration the call was made to ("" if unknown)
	approval bool   // still awaiting approval
	reissued bool   // its request was withdrawn and issued again
	detached bool   // nobody waited for it in the kernel (ApprovalRequested.Detached)
	decision *protocol.ApprovalDecided
	invoked  bool
}

// resume brings back one call that was pending when the session was
// journaled. rev is the revision of the registration it was made to;
// decision is its journaled decision, if any.
func (s *Session) resume(p *restoredCall) {
	id, name, input, invoker, rev, invoked, decision := p.id, p.name, p.input, p.invoker, p.rev, p.invoked, p.decision
	s.mu.Lock()
	r := s.caps[name]
	s.mu.Unlock()
	c := &call{id: id, name: name, input: input, invoker: invoker, reg: r, done: make(chan struct{}), started: time.Now(), resumed: true,
		// A detached call (Start) reports its outcome as an event, which
		// any peer that comes back receives; any other waited for Invoke to
		// return, in the process that stopped. (Journals from before
		// "detached" existed: a user's invocations were the detached ones.)
		callerGone: !p.detached && invoker != protocol.AudienceUser, detached: p.detached}
	if r == nil {
		c.reg = &registration{logKey: "capability:?:" + name, timeout: s.opts.DefaultCallTimeout}
	} else {
		c.origin, c.side = r.def[0].Origin, r.def[0].Side
	}
	s.mu.Lock()
	s.calls[id] = c
	s.mu.Unlock()
	switch {
	case r == nil:
		s.finish(c, protocol.Fail(protocol.CodeUnavailable, "the session was restored (a restart, or another node took it over) and the capability %q is no longer registered; the call did not run", name))
	case invoked && r.handler == nil:
		c.dispatched = true // the peer has it: wait for its result, never dispatch again
		go s.run(context.Background(), c)
	case invoked:
		s.finish(c, protocol.Fail(protocol.CodeUnavailable, "the kernel that ran %q stopped while it was running (a restart, or a node lost); it may or may not have taken effect", name))
	case decision != nil && decision.Decision == protocol.DecisionRejected:
		s.finish(c, protocol.Fail(protocol.CodeRejected, "%s", rejection(decision.DecidedBy, decision.Feedback)))
	case rev != "" && rev != r.rev:
		s.finish(c, protocol.Fail(protocol.CodeStaleApproval, "capability %q changed while the kernel restarted; the call awaiting its approval did not run: invoke it again", name))
	case !r.def[0].RequiresApproval:
		s.finish(c, protocol.Fail(protocol.CodeStaleApproval, "capability %q no longer requires approval after the restart; the call awaiting approval did not run: invoke it again", name))
	case decision != nil:
		// Approved and journaled, not dispatched: the decision is spent
		// on this dispatch, never asked for again.
		c.approval = make(chan protocol.CapabilityApprove, 1)
		s.mu.Lock()
		c.decided, c.digest = true, inputDigest(r, input)
		s.mu.Unlock()
		c.approval <- protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionApproved, DecidedBy: decision.DecidedBy, InputDigest: c.digest}
		go s.run(context.Background(), c)
	default: // awaiting approval
		c.approval = make(chan protocol.CapabilityApprove, 1)
		s.mu.Lock()
		c.awaitingApproval, c.requested, c.reissued, c.digest = true, true, p.reissued, inputDigest(r, input)
		s.mu.Unlock()
		go s.run(context.Background(), c)
	}
}
