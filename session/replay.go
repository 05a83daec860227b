package session

import (
	"slices"

	"github.com/brainrt/brain/protocol"
)

// replay is what a restore builds from a journal's events before it
// resumes anything: the registry, the calls still pending, the render
// streams still open, the finished calls and the turns (Restore,
// RestoreFrom, Compact).
type replay struct {
	s       *Session
	calls   []*restoredCall
	byID    map[string]*restoredCall
	streams []restoredStream
	revs    map[string]string // name → revision of its latest registration, of any origin
}

// restoredStream is a render stream whose partials the journal holds but
// neither its call nor its end (render_stream.go): a stream dies with the
// process, so a restore ends it, as RenderStream.Close would.
type restoredStream struct {
	id, name string
	owner    *Peer
}

func newReplay(s *Session) *replay {
	return &replay{s: s, byID: map[string]*restoredCall{}, revs: map[string]string{}}
}

// apply replays e. With logged, e also enters the session's log as its
// newest event; without, it only changes the state (an event of a
// checkpoint's State, which the log reads back from the journal when a
// subscriber asks for it).
func (r *replay) apply(e Event, logged bool) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var owner *Peer
	ownerOf := func(name string) {
		if reg, ok := s.caps[name]; ok && r.revs[name] == reg.rev {
			owner = &reg.owner
		}
	}
	switch m := e.Msg.(type) {
	case *protocol.CapabilityRegister:
		for _, c := range m.Capabilities {
			r.revs[c.Name], _ = revisionOf(&c)
			s.dropCapLocked(c.Name) // a registration of another origin ends the old one
			if p, ok := restoredOwner(c.Origin); ok {
				if reg, err := s.prepare(p, c, nil); err == nil {
					s.putCapLocked(c.Name, reg)
				}
			}
		}
	case *protocol.CapabilityDeregister:
		for _, n := range m.Names {
			if reg, ok := s.caps[n]; !ok || reg.def[0].Origin.Kind != protocol.OriginFramework {
				s.dropCapLocked(n)
				delete(r.revs, n)
			}
		}
	case *protocol.ApprovalRequested:
		ownerOf(m.Name)
		if p := r.byID[m.CallID]; p != nil { // reissued after a re-registration
			p.rev = r.revs[m.Name]
		} else {
			p := &restoredCall{id: m.CallID, name: m.Name, input: m.Input, invoker: m.Invoker, approval: true, rev: r.revs[m.Name], detached: m.Detached}
			r.calls, r.byID[m.CallID] = append(r.calls, p), p
		}
	case *protocol.ApprovalDecided:
		ownerOf(m.Name)
		if p := r.byID[m.CallID]; p != nil {
			p.approval, p.decision = false, m
		}
	case *protocol.ApprovalWithdrawn:
		ownerOf(m.Name)
		if p := r.byID[m.CallID]; p != nil {
			p.reissued = true
		}
	case *protocol.CapabilityInvoked:
		ownerOf(m.Name)
		r.streams = slices.DeleteFunc(r.streams, func(st restoredStream) bool { return st.id == m.CallID })
		if p := r.byID[m.CallID]; p != nil {
			p.approval, p.invoked = false, true
		} else {
			p := &restoredCall{id: m.CallID, name: m.Name, input: m.Input, invoker: protocol.AudienceLLM, invoked: true, rev: r.revs[m.Name]}
			r.calls, r.byID[m.CallID] = append(r.calls, p), p
		}
	case *protocol.RenderInvoked:
		ownerOf(m.CapabilityName)
		if m.Partial && r.byID[m.CallID] == nil && !slices.ContainsFunc(r.streams, func(st restoredStream) bool { return st.id == m.CallID }) {
			r.streams = append(r.streams, restoredStream{m.CallID, m.CapabilityName, owner})
		}
	case *protocol.CapabilityOutcome:
		ownerOf(m.Name)
		r.streams = slices.DeleteFunc(r.streams, func(st restoredStream) bool { return st.id == m.CallID })
		var fireAndForget *Peer
		if p := r.byID[m.CallID]; p != nil {
			delete(r.byID, m.CallID)
			r.calls = slices.DeleteFunc(r.calls, func(q *restoredCall) bool { return q == p })
			// Fire-and-forget as the call was made: the registration it
			// was dispatched to (p.rev), not a later one of the name.
			if reg, ok := s.caps[m.Name]; ok && p.invoked && p.rev == reg.rev && reg.def[0].FireAndForget && reg.handler == nil {
				fireAndForget = &reg.owner
			}
		}
		s.rememberFinishedLocked(m.CallID, m.Outcome, fireAndForget)
	case *protocol.TurnStarted, *protocol.TurnEnded, *protocol.ConversationMessage:
		s.replayTurnLocked(e.Seq, m) // turn.go
	}
	if !logged {
		s.events.last = e.Seq
		return
	}
	s.events.last = e.Seq - 1
	s.events.appendLocked(entry{typ: e.Msg.MessageType(), msg: e.Msg, owner: owner})
}

// shapesState reports whether an event of type t changes what apply
// builds (the registry, calls, streams, finished calls, turns), not only
// the log.
func shapesState(t protocol.Type) bool {
	switch t {
	case protocol.TypeCapabilityRegister, protocol.TypeCapabilityDeregister,
		protocol.TypeTurnStarted, protocol.TypeTurnEnded, protocol.TypeConversationMessage:
		return true
	}
	return callOf(t)
}

// callOf reports whether an event of type t belongs to one call (the
// call id of callID).
func callOf(t protocol.Type) bool {
	switch t {
	case protocol.TypeApprovalRequested, protocol.TypeApprovalDecided, protocol.TypeApprovalWithdrawn,
		protocol.TypeCapabilityInvoked, protocol.TypeRenderInvoked, protocol.TypeCapabilityOutcome:
		return true
	}
	return false
}

// callID returns the call a call event belongs to ("" for any other).
func callID(m protocol.Message) string {
	switch m := m.(type) {
	case *protocol.ApprovalRequested:
		return m.CallID
	case *protocol.ApprovalDecided:
		return m.CallID
	case *protocol.ApprovalWithdrawn:
		return m.CallID
	case *protocol.CapabilityInvoked:
		return m.CallID
	case *protocol.RenderInvoked:
		return m.CallID
	case *protocol.CapabilityOutcome:
		return m.CallID
	}
	return ""
}
