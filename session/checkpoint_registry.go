package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/brainrt/brain/protocol"
)

// A checkpoint's State keeps the registrations that still matter, not
// every one a session ever made: a session that registers a turn-scoped
// tool every turn, or re-registers its definitions at every reconnect,
// would otherwise carry them all (a probe's session of 7,744 events kept
// 544 of them, and one with more churn outgrew the bucket's 1 MiB and was
// never checkpointed again).
//
// A registration of a name lasts from its capability_register to the
// name's next registration or deregistration. It is kept when something
// kept reads it — a pending call's approval_requested or
// capability_invoked, which take its revision, an open render stream,
// which takes its owner — or when it lasts to the end (the registry the
// checkpoint restores). A registration left out leaves an earlier kept
// one in place where nothing reads it, and the name's next change, kept
// or not, ends it: a deregistration is kept when a kept registration is
// in place. The reduction is then checked: what the reduced events
// restore must be what the events restore (replay.digest), or the events
// are kept as they are.

// trimRegistrations returns events (a checkpoint's State, in seq order)
// without the registrations nothing reads, if they restore want (the
// digest of a replay of what events stand for), else events.
func trimRegistrations(events []Event, want string, o *Options) []Event {
	// Backward: whether each capability's registration is read before
	// the name's next registration or deregistration, or lasts to the end.
	type key struct{ event, cap int }
	needed := map[key]bool{}
	read := map[string]bool{}  // name → a kept call reads it after here, before its next change
	later := map[string]bool{} // name → it changes after here
	for i := len(events) - 1; i >= 0; i-- {
		switch m := events[i].Msg.(type) {
		case *protocol.ApprovalRequested:
			read[m.Name] = true
		case *protocol.CapabilityInvoked:
			read[m.Name] = true
		case *protocol.RenderInvoked: // an open stream keeps its owner
			read[m.CapabilityName] = true
		case *protocol.CapabilityDeregister:
			for _, n := range m.Names {
				read[n], later[n] = false, true
			}
		case *protocol.CapabilityRegister:
			for k := len(m.Capabilities) - 1; k >= 0; k-- {
				n := m.Capabilities[k].Name
				if k < len(m.Capabilities)-1 && slices.ContainsFunc(m.Capabilities[k+1:], func(c protocol.Capability) bool { return c.Name == n }) {
					continue // the same event registers it again after this one
				}
				needed[key{i, k}] = read[n] || !later[n]
				read[n], later[n] = false, true
			}
		}
	}
	// Forward: keep what is needed, and what ends a kept registration.
	registered := map[string]bool{} // name → the kept events leave it registered here
	out := make([]Event, 0, len(events))
	trimmed := false
	for i, e := range events {
		switch m := e.Msg.(type) {
		case *protocol.CapabilityRegister:
			var caps []protocol.Capability
			for k, c := range m.Capabilities {
				if needed[key{i, k}] {
					caps = append(caps, c)
					registered[c.Name] = true
				}
			}
			switch {
			case len(caps) == len(m.Capabilities):
				out = append(out, e)
			case len(caps) > 0:
				out = append(out, Event{Seq: e.Seq, Msg: &protocol.CapabilityRegister{Capabilities: caps}})
				trimmed = true
			default:
				trimmed = true
			}
		case *protocol.CapabilityDeregister:
			var names []string
			for _, n := range m.Names {
				if registered[n] {
					names = append(names, n)
				}
				registered[n] = false
			}
			switch {
			case len(names) == len(m.Names):
				out = append(out, e)
			case len(names) > 0:
				out = append(out, Event{Seq: e.Seq, Msg: &protocol.CapabilityDeregister{Names: names}})
				trimmed = true
			default:
				trimmed = true
			}
		default:
			out = append(out, e)
		}
	}
	if !trimmed || stateOf(out, o) != want {
		return events
	}
	return out
}

// stateOf returns what events (State events) restore, as replay.digest
// writes it.
func stateOf(events []Event, o *Options) string {
	r := newReplay(New("checkpoint", o))
	for _, e := range events {
		r.apply(e, false)
	}
	return r.digest()
}

// digest writes out what a replay built, but for the log and the
// finished calls: the registry (with each registration's revision, owner
// and definition), the revisions of every name, the pending calls, the
// open render streams and the turns.
func (r *replay) digest() string {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	j := func(v any) string { out, _ := json.Marshal(v); return string(out) }
	for _, n := range slices.Sorted(maps.Keys(s.caps)) {
		c := s.caps[n]
		fmt.Fprintf(&b, "cap %q %s %v %s\n", n, c.rev, c.owner, j(c.def))
	}
	for _, n := range slices.Sorted(maps.Keys(r.revs)) {
		fmt.Fprintf(&b, "rev %q %s\n", n, r.revs[n])
	}
	for _, c := range r.calls {
		fmt.Fprintf(&b, "call %q %q %s %s %s %v %v %v %v %s\n", c.id, c.name, c.input, c.invoker, c.rev, c.approval, c.reissued, c.detached, c.invoked, j(c.decision))
	}
	for _, st := range r.streams {
		fmt.Fprintf(&b, "stream %q %q %s\n", st.id, st.name, j(st.owner))
	}
	fmt.Fprintf(&b, "turn %d %v %s %s %s\n", s.turn, s.turns.active, j(s.turns.records), j(s.turns.msgs), j(s.turns.meta))
	return b.String()
}
