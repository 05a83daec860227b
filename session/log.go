package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/brainrt/brain/protocol"
)

// Event is one message a session emitted, with its place in the session's
// log. Seq starts at 1 and grows by one per event.
//
// Owner, on a call event (approval_requested, approval_decided,
// approval_withdrawn, capability_invoked, render_invoked,
// capability_outcome), is the party that owned the called capability when
// the call was made — not whoever holds the name now. A transport shows a
// call's events to that party only (and to the client and operators). It is
// the zero Peer on other events, and on call events restored from a journal
// whose owner the journal cannot tell (agent-side capabilities): those are
// for the client and operators only.
type Event struct {
	Seq   uint64
	Msg   protocol.Message
	Owner Peer
}

// entry is an event as the log keeps it. Call events point at their call and
// are turned into messages only when a subscriber reads them, so that an
// invocation nobody watches costs no message allocations.
type entry struct {
	seq  uint64
	typ  protocol.Type
	call *call            // capability_invoked, render_invoked, capability_outcome
	msg  protocol.Message // every other type
	// owner is the owning party of a call event's capability at the time
	// of the call (a registration's owner field, which never changes); nil
	// when unknown or not a call event.
	owner *Peer
	// bytes is what the event holds of peers' and models' values
	// (eventValueBytes), counted while the log has a byte budget; 0 once
	// the event has left memory for it.
	bytes uint32
}

// eventLog is a ring of the latest events, grown as events arrive up to
// keep (an idle session with a short history stays small). The log
// replays the latest size events: keep of them from the ring, and the
// older ones, when keep is smaller, read back from the session's History
// (Subscription.TryNext). With a byte budget, fewer than keep stay in the
// ring when they are large (evictForBytes). Guarded by Session.mu.
type eventLog struct {
	ring  []entry
	size  uint64 // events replayed
	keep  uint64 // events in memory (the ring's bound), at most size
	first uint64 // seq of the first event appended (1, or later after a restore)
	// origin is the seq of the session's first event when the log starts
	// later (restoredFrom); 0 when the log starts with it.
	origin uint64
	last   uint64        // seq of the newest event; 0 before the first
	wake   chan struct{} // closed on the next append; nil when nobody waits
	// notify holds the subscribers told of the next append by a call
	// instead of a channel (Subscription.Notify); nil when none is.
	notify map[*Subscription]func()
	// budget bounds held, the value bytes of the events in the ring
	// (Options.LogMemoryBytes; 0: no bound), and floor is the seq of the
	// oldest event the budget left in memory (0: none has left).
	budget, held int
	floor        uint64
}

func newEventLog(size, keep, budget int) eventLog {
	return eventLog{size: uint64(size), keep: uint64(min(keep, size)), budget: budget}
}

// appendLocked adds an event and wakes waiting subscribers.
func (l *eventLog) appendLocked(e entry) uint64 {
	l.last++
	e.seq = l.last
	if l.first == 0 {
		l.first = l.last
	}
	if l.budget > 0 {
		e.bytes = uint32(eventValueBytes(&e)) // logbytes.go
	}
	if i := (l.last - l.first) % l.keep; uint64(len(l.ring)) <= i {
		l.ring = append(l.ring, e)
	} else {
		l.held -= int(l.ring[i].bytes)
		l.ring[i] = e
	}
	if l.held += int(e.bytes); l.held > l.budget && l.budget > 0 {
		l.evictForBytes()
	}
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	for sub, f := range l.notify {
		delete(l.notify, sub)
		f()
	}
	return l.last
}

// oldest returns the seq of the oldest event the log replays.
func (l *eventLog) oldest() uint64 { return l.oldestOf(l.size) }

// inMemory returns the seq of the oldest event still in the ring.
func (l *eventLog) inMemory() uint64 { return max(l.oldestOf(l.keep), l.floor) }

func (l *eventLog) oldestOf(n uint64) uint64 {
	if l.first == 0 {
		return 1
	}
	from := l.first
	if l.origin != 0 {
		from = l.origin
	}
	if l.last-from < n {
		return from
	}
	return l.last - n + 1
}

// restoredFrom notes that the session's events start at seq first, before
// the log's (a restore from a [Checkpoint]): those before the log's are
// replayed from History, as the events the ring no longer holds are.
func (l *eventLog) restoredFrom(first uint64) {
	if l.first > first {
		l.origin = first
		l.floor = max(l.floor, l.first)
	}
}

func (l *eventLog) at(seq uint64) entry { return l.ring[(seq-l.first)%l.keep] }

// message materialises an entry (a call event whose message was made
// already, for the journal, has it in msg).
func (e entry) message() protocol.Message {
	if e.msg != nil || e.call == nil {
		return e.msg
	}
	c := e.call
	switch e.typ {
	case protocol.TypeCapabilityInvoked:
		return &protocol.CapabilityInvoked{CallID: c.id, Name: c.name, Input: c.input, InvokedBy: protocol.InvokedByAgent}
	case protocol.TypeRenderInvoked:
		return &protocol.RenderInvoked{CapabilityName: c.name, Props: c.input, CallID: c.id}
	default:
		return &protocol.CapabilityOutcome{CallID: c.id, Name: c.name, Outcome: c.outcome}
	}
}

// ErrSubscriptionClosed is returned by Next after Close.
var ErrSubscriptionClosed = errors.New("session: subscription closed")

// Subscription reads a session's events in order. It holds no buffer of its
// own: it reads the session's log, so a subscriber that does not read costs
// nothing, and one that falls further behind than the log keeps receives a
// snapshot instead of the events it missed. Not safe for concurrent use.
type Subscription struct {
	s         *Session
	next      uint64             // seq of the next event to deliver
	first     *protocol.Snapshot // delivered before anything else; nil once delivered
	back      []Event            // events read back from the session's History, delivered before next
	noHistory bool               // a snapshot, never a read-back (SnapshotWhenBehind)
	closed    chan struct{}
	closeOnce sync.Once // Close may be called concurrently, and more than once
}

// readBackTimeout bounds one read back from a session's History.
const readBackTimeout = 5 * time.Second

// SnapshotWhenBehind makes the subscription deliver a snapshot, instead
// of reading them back from the session's History, for the events that
// are no longer in memory (Options.LogMemory, LogMemoryBytes). It is for
// a subscriber that needs each call event's Owner, which events read back
// do not carry (see [EventReader]). Call it before the first TryNext or
// Next.
func (sub *Subscription) SnapshotWhenBehind() { sub.noHistory = true }

// Subscribe returns a subscription that delivers every event after
// afterSeq, then the live stream. afterSeq is the last seq the subscriber
// saw (0 for none). When those events are no longer in the log — or
// afterSeq is ahead of the session — the first event delivered is a
// snapshot of the session's current state.
func (s *Session) Subscribe(afterSeq uint64) *Subscription {
	return &Subscription{s: s, next: afterSeq + 1, closed: make(chan struct{})}
}

// SubscribeSnapshot returns a subscription whose first event is a snapshot
// of the session as of this call, followed by every event after it. The
// snapshot is taken before SubscribeSnapshot returns: a command the
// subscriber sends afterwards has its events delivered as events, never
// folded into a snapshot taken later (a capability_outcome folded into one
// would be lost, since a snapshot lists only pending calls).
func (s *Session) SubscribeSnapshot() *Subscription {
	s.mu.Lock()
	snap := s.snapshotLocked()
	s.mu.Unlock()
	return &Subscription{s: s, next: snap.Seq + 1, first: snap, closed: make(chan struct{})}
}

// Close ends the subscription; a blocked Next returns ErrSubscriptionClosed,
// and a call arranged by Notify is not made. It is safe to call from any
// goroutine, more than once.
func (sub *Subscription) Close() {
	sub.closeOnce.Do(func() {
		close(sub.closed)
		s := sub.s
		s.mu.Lock()
		delete(s.events.notify, sub)
		s.mu.Unlock()
	})
}

// Notify arranges for f to be called once, when the next event is
// appended — for a transport that keeps no goroutine waiting on an idle
// subscription — and reports true; or, when TryNext would return an event
// now, it arranges nothing and reports false. f is called by the goroutine
// appending the event, with the session's lock held: it must be quick,
// must not block and must not call into the session (start a goroutine).
// A later Notify replaces f; Close cancels it.
func (sub *Subscription) Notify(f func()) bool {
	select {
	case <-sub.closed:
		return false
	default:
	}
	if sub.first != nil || len(sub.back) > 0 {
		return false
	}
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.events
	if sub.next <= l.last || sub.next > l.last+1 {
		return false // an event, or a snapshot, is ready
	}
	if l.notify == nil {
		l.notify = map[*Subscription]func(){}
	}
	l.notify[sub] = f
	return true
}

// Next returns the next event, waiting for one until ctx is done.
func (sub *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		ev, ok, wake, err := sub.TryNext()
		if err != nil || ok {
			return ev, err
		}
		select {
		case <-wake:
		case <-sub.closed:
			return Event{}, ErrSubscriptionClosed
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// TryNext is Next without waiting, for a transport that waits on several
// things in one goroutine: it returns the next event (ok true), or, when
// there is none yet, a channel closed once there may be one — call TryNext
// again then. After Close it returns ErrSubscriptionClosed.
func (sub *Subscription) TryNext() (ev Event, ok bool, wake <-chan struct{}, err error) {
	return sub.tryNext(nil)
}

// TryNextOrNotify is TryNext without a channel: when there is no event
// yet, it arranges, as [Subscription.Notify] does, for f to be called on
// the next append, and returns ok false. A transport that waits on a
// channel of its own then allocates nothing to wait (a wait's channel is
// the one allocation of a writer that keeps up, and during a garbage
// collection a goroutine's first allocation costs it 64 KiB of marking).
// f is called under the same rules as Notify's.
func (sub *Subscription) TryNextOrNotify(f func()) (Event, bool, error) {
	ev, ok, _, err := sub.tryNext(f)
	return ev, ok, err
}

// tryNext is TryNext, or with notify set TryNextOrNotify.
func (sub *Subscription) tryNext(notify func()) (ev Event, ok bool, wake <-chan struct{}, err error) {
	select {
	case <-sub.closed:
		return Event{}, false, nil, ErrSubscriptionClosed
	default:
	}
	if snap := sub.first; snap != nil {
		sub.first = nil
		return Event{Seq: snap.Seq, Msg: snap}, true, nil, nil
	}
	if len(sub.back) > 0 {
		ev := sub.back[0]
		sub.back[0] = Event{} // the subscription holds no event it delivered
		if sub.back = sub.back[1:]; len(sub.back) == 0 {
			sub.back = nil
		}
		return ev, true, nil, nil
	}
	s := sub.s
	s.mu.Lock()
	l := &s.events
	switch {
	case sub.next > l.last+1 || (sub.next < l.oldest() && l.last > 0):
		return sub.snapshotUnlock()
	case sub.next < l.inMemory() && l.last > 0:
		if s.opts.History == nil || sub.noHistory {
			return sub.snapshotUnlock()
		}
		after, through := sub.next-1, l.inMemory()-1
		s.mu.Unlock()
		if !sub.readBack(after, through) {
			s.mu.Lock()
			return sub.snapshotUnlock()
		}
		return sub.tryNext(notify)
	case sub.next <= l.last:
		e := l.at(sub.next)
		sub.next++
		s.mu.Unlock()
		ev := Event{Seq: e.seq, Msg: e.message()}
		if e.owner != nil {
			ev.Owner = *e.owner
		}
		return ev, true, nil, nil
	}
	if notify != nil {
		if l.notify == nil {
			l.notify = map[*Subscription]func(){}
		}
		l.notify[sub] = notify
		s.mu.Unlock()
		return Event{}, false, nil, nil
	}
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	w := l.wake
	s.mu.Unlock()
	return Event{}, false, w, nil
}

// snapshotUnlock delivers a snapshot of the session as of now, in place
// of every event up to now, and unlocks the session (locked by the
// caller).
func (sub *Subscription) snapshotUnlock() (Event, bool, <-chan struct{}, error) {
	s := sub.s
	snap := s.snapshotLocked()
	sub.next = s.events.last + 1
	s.mu.Unlock()
	return Event{Seq: snap.Seq, Msg: snap}, true, nil, nil
}

// readBack reads the events after through after from the session's
// History into sub.back, and reports whether it read them all, in order.
// A read that fails or falls short is logged: the subscriber gets a
// snapshot instead.
func (sub *Subscription) readBack(after, through uint64) bool {
	s := sub.s
	ctx, cancel := context.WithTimeout(context.Background(), readBackTimeout)
	events, err := s.opts.History.ReadEvents(ctx, after, through)
	cancel()
	if err == nil {
		for i, ev := range events {
			if want := after + 1 + uint64(i); ev.Seq != want {
				err = fmt.Errorf("event %d of %d read back has seq %d, want %d", i+1, len(events), ev.Seq, want)
				break
			}
			if ev.Msg == nil {
				err = fmt.Errorf("event %d read back has no message", ev.Seq)
				break
			}
		}
	}
	if err == nil && uint64(len(events)) != through-after {
		err = fmt.Errorf("%d of the %d events were read back", len(events), through-after)
	}
	if err != nil {
		s.log.Warn("event log: events no longer in memory could not be read back; the subscriber gets a snapshot instead",
			slog.Uint64("after", after), slog.Uint64("through", through), slog.String("error", err.Error()))
		return false
	}
	for i := range events {
		events[i].Owner = Peer{} // a journal records no owner (EventReader)
	}
	sub.back, sub.next = events, through+1
	return true
}

// LastSeq returns the seq of the newest event.
func (s *Session) LastSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events.last
}

// Snapshot returns the session's current state: every registration, sorted
// by name, and every pending call, sorted by call id, as of the newest seq.
func (s *Session) Snapshot() *protocol.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Session) snapshotLocked() *protocol.Snapshot {
	snap := &protocol.Snapshot{
		Seq:          s.events.last,
		Capabilities: s.listLocked(nil),
		PendingCalls: make([]protocol.PendingCall, 0, len(s.calls)),
		Turn:         s.turnSnapshotLocked(), // turn.go
	}
	for _, c := range s.sortedCallsLocked() {
		pc := protocol.PendingCall{CallID: c.id, Name: c.name, Input: c.input, Invoker: c.invoker, State: protocol.CallRunning}
		if c.awaitingApproval {
			pc.State, pc.InputDigest, pc.Revision = protocol.CallAwaitingApproval, c.digest, c.reg.rev
		}
		snap.PendingCalls = append(snap.PendingCalls, pc)
	}
	return snap
}
