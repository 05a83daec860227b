package session

import (
	"errors"
	"fmt"
	"slices"

	"github.com/brainrt/brain/protocol"
)

// A Checkpoint is a session's events up to Seq in short: what
// [RestoreFrom] needs of them to bring the session back as [Restore] would
// from all of them. A store keeps one beside a session's events so that a
// wake reads a few events instead of thousands (package store).
//
// It holds the session's latest events (Latest, contiguous, ending at
// Seq: what the restored session keeps in memory), and of the events
// before them only those that still shape the session (State): the
// registrations something still reads (checkpoint_registry.go), turns
// and conversation messages, and the events of calls that had not
// finished by then (a render stream still open among them). The finished calls the session remembers —
// so that a late result is told how its call ended — are in Finished.
// Everything else before Latest (the events of finished calls, streamed
// text) is left out: a subscriber that asks for it is read it back from
// the journal (Options.History), as for any event older than the
// session's memory.
type Checkpoint struct {
	// First is the seq of the session's first event.
	First uint64 `json:"first"`
	// Seq is the seq of the last event the checkpoint covers.
	Seq uint64 `json:"seq"`
	// State are the events before Latest that shape the session, in seq
	// order (with gaps).
	State []Event `json:"-"`
	// Finished is how the calls that finished before Latest ended, as the
	// session remembers them.
	Finished FinishedCalls `json:"finished"`
	// Latest are the latest events, contiguous, the last of them Seq.
	Latest []Event `json:"-"`
	// Bytes is what the events it covers take in their journal, when the
	// store that read it counts them (package server's per-session
	// journal limit); a restore does not use it.
	Bytes int64 `json:"-"`
}

// FinishedCalls is how a session's finished calls ended, as it
// remembers them (Options.FinishedMemory), for a [Checkpoint]: a call id
// is a prefix and a counter (the kernel makes them so), and Calls
// packs each call's counter with indexes into Prefixes and Codes (or
// Owners, for a fire-and-forget call a peer owned). Calls is a ring, as
// the session keeps it: when full, Next is where its oldest is (a lookup
// reads it in this order, and an id may have ended twice).
type FinishedCalls struct {
	Prefixes []string        `json:"prefixes,omitempty"`
	Codes    []protocol.Code `json:"codes,omitempty"`
	Owners   []Peer          `json:"owners,omitempty"`
	Calls    []uint64        `json:"calls,omitempty"`
	Next     int             `json:"next,omitempty"`
}

// Compact returns the checkpoint of a session's events: those of cp (nil
// for none) followed by events, which continue it (from cp.Seq+1; from
// any seq without cp). opts are the options the session is restored with
// (nil: the defaults): they say how many latest events it keeps in memory
// (Options.LogMemory; 32 by default) and how many finished calls it
// remembers. The events are replayed as a restore would, without resuming
// anything. It is an error when the events do not continue cp, or cp does
// not hold together.
func Compact(cp *Checkpoint, events []Event, opts *Options) (*Checkpoint, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Journal, o.History, o.Observe, o.Logger = nil, nil, nil, nil
	keep := 32
	if o.LogMemory > 0 {
		keep = o.LogMemory
	}
	var state, latest []Event
	first, prev := uint64(0), uint64(0)
	if cp != nil {
		if err := cp.check(); err != nil {
			return nil, err
		}
		state, latest, first, prev = cp.State, cp.Latest, cp.First, cp.Seq
	}
	for i, e := range events {
		if e.Msg == nil || e.Seq == 0 || (cp != nil || i > 0) && e.Seq != prev+1 {
			return nil, fmt.Errorf("checkpoint: event %d has seq %d after %d", i, e.Seq, prev)
		}
		if first == 0 {
			first = e.Seq
		}
		prev = e.Seq
	}
	all := slices.Concat(latest, events) // contiguous
	if len(all) == 0 {
		return nil, errors.New("checkpoint: no events")
	}
	cut := max(0, len(all)-keep)
	// Replay, state only, up to the cut: the finished calls are those the
	// session remembered there, before Latest's outcomes.
	s := New("checkpoint", &o)
	r := newReplay(s)
	if cp != nil {
		if err := r.state(cp); err != nil {
			return nil, err
		}
	}
	for _, e := range all[:cut] {
		r.apply(e, false)
	}
	return &Checkpoint{
		First:    first,
		Seq:      all[len(all)-1].Seq,
		State:    trimRegistrations(shaping(slices.Concat(state, all[:cut])), r.digest(), &o),
		Finished: s.finished.export(),
		Latest:   slices.Clone(all[cut:]),
	}, nil
}

// shaping returns the events of events that shape a session, for a
// checkpoint's State: a call's events only when the call has not ended
// by the last of them (no capability_outcome of its id at or after it).
func shaping(events []Event) []Event {
	ended := map[string]int{} // call id → index of its last outcome
	for i, e := range events {
		if o, ok := e.Msg.(*protocol.CapabilityOutcome); ok {
			ended[o.CallID] = i
		}
	}
	out := events[:0]
	for i, e := range events {
		t := e.Msg.MessageType()
		if !shapesState(t) {
			continue
		}
		if callOf(t) {
			if last, ok := ended[callID(e.Msg)]; ok && last >= i {
				continue
			}
		}
		out = append(out, e)
	}
	return slices.Clip(out)
}

// checkpoint replays cp into the session being restored: its State, its
// finished calls, then its Latest events into the log. It checks that cp
// holds together first.
func (r *replay) checkpoint(cp *Checkpoint) error {
	if err := cp.check(); err != nil {
		return err
	}
	if err := r.state(cp); err != nil {
		return err
	}
	s := r.s
	for _, e := range cp.Latest {
		r.apply(e, true)
	}
	s.mu.Lock()
	s.events.restoredFrom(cp.First)
	s.mu.Unlock()
	return nil
}

// state replays cp's State and its finished calls, not its Latest.
func (r *replay) state(cp *Checkpoint) error {
	for _, e := range cp.State {
		r.apply(e, false)
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.finished.load(cp.Finished, s.idPrefix); err != nil {
		return fmt.Errorf("checkpoint: finished calls: %w", err)
	}
	return nil
}

// Check reports what is wrong with a checkpoint read from a store —
// events out of order, or not ending at Seq; a finished call naming no
// entry of its tables — as [RestoreFrom] would refuse it: a store checks
// it first, and wakes the session from its events instead.
func (cp *Checkpoint) Check() error {
	if err := cp.check(); err != nil {
		return err
	}
	if err := cp.Finished.check(); err != nil {
		return fmt.Errorf("checkpoint: finished calls: %w", err)
	}
	return nil
}

// check is Check but for the finished calls (finishedRing.load checks
// them).
func (cp *Checkpoint) check() error {
	if len(cp.Latest) == 0 {
		return errors.New("checkpoint: no latest events")
	}
	if cp.First == 0 {
		return errors.New("checkpoint: the first event's seq is 0")
	}
	prev := cp.First - 1
	for i, e := range cp.State {
		if e.Msg == nil || e.Seq <= prev {
			return fmt.Errorf("checkpoint: state event %d has seq %d after %d", i, e.Seq, prev)
		}
		prev = e.Seq
	}
	for i, e := range cp.Latest {
		if e.Msg == nil || (i == 0 && e.Seq <= prev) || (i > 0 && e.Seq != prev+1) {
			return fmt.Errorf("checkpoint: latest event %d has seq %d after %d", i, e.Seq, prev)
		}
		prev = e.Seq
	}
	if prev != cp.Seq {
		return fmt.Errorf("checkpoint: its latest event is %d, not its seq %d", prev, cp.Seq)
	}
	return nil
}

// export returns what the ring remembers, with its tables but for the
// session's own call-id prefix (its first): a session restored from it
// puts its own first.
func (f *finishedRing) export() FinishedCalls {
	out := FinishedCalls{Codes: slices.Clone(f.codes), Owners: slices.Clone(f.owners), Next: f.next}
	if len(f.prefixes) > 1 {
		out.Prefixes = slices.Clone(f.prefixes[1:])
	}
	out.Calls = make([]uint64, len(f.calls))
	for i, c := range f.calls {
		out.Calls[i] = uint64(c)
	}
	return out
}

// load makes the ring remember fc's calls, under tables that put own, the
// session's call-id prefix, first: as fc has them when the ring is as
// large, else the newest that fit. It refuses a call that names no entry
// of fc's tables, and tables past their bounds.
func (f *finishedRing) load(fc FinishedCalls, own string) error {
	if err := fc.check(); err != nil {
		return err
	}
	if f.size == 0 || len(fc.Calls) == 0 {
		return nil
	}
	f.prefixes = append([]string{own}, fc.Prefixes...)
	f.codes, f.owners = slices.Clone(fc.Codes), slices.Clone(fc.Owners)
	calls := fc.Calls
	f.next = fc.Next
	if len(calls) != f.size { // a ring of another size: oldest first, the newest that fit
		calls = append(slices.Clone(calls[fc.Next:]), calls[:fc.Next]...)
		calls, f.next = calls[max(0, len(calls)-f.size):], 0
	}
	f.calls = make([]finishedCall, len(calls), min(f.size, max(16, len(calls))))
	for i, c := range calls {
		f.calls[i] = finishedCall(c)
	}
	return nil
}

// check reports a call that names no entry of the tables, and tables past
// their bounds.
func (fc *FinishedCalls) check() error {
	switch {
	case len(fc.Prefixes)+1 > maxFinishedPrefixes:
		return fmt.Errorf("%d call-id prefixes, more than %d", len(fc.Prefixes), maxFinishedPrefixes-1)
	case len(fc.Codes) > maxFinishedCodes:
		return fmt.Errorf("%d codes, more than %d", len(fc.Codes), maxFinishedCodes)
	case len(fc.Owners) > maxFinishedOwners:
		return fmt.Errorf("%d owners, more than %d", len(fc.Owners), maxFinishedOwners)
	case len(fc.Calls) > 0 && (len(fc.Codes) == 0 || fc.Codes[0] != ""):
		return errors.New("the first code is not a value's (\"\")")
	case fc.Next < 0 || fc.Next > 0 && fc.Next >= len(fc.Calls):
		return fmt.Errorf("the oldest call is at %d of %d", fc.Next, len(fc.Calls))
	}
	for i, c := range fc.Calls {
		call := finishedCall(c)
		code := call.code()
		if call.prefix() > len(fc.Prefixes) ||
			code != codeOverflow && int(code) >= len(fc.Codes) && (code < codeFireAndForget || int(code-codeFireAndForget) >= len(fc.Owners)) {
			return fmt.Errorf("call %d names no entry of the tables", i)
		}
	}
	return nil
}
