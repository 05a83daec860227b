package session

import (
	"math"
	"time"

	"github.com/brainrt/brain/protocol"
)

// progressEvery is the shortest gap between two progress reports of one
// call passed on to its invoker: a peer that reports every byte must not
// turn into a notification per byte for an MCP host. A report that says
// the call is complete (Progress ≥ Total) always passes.
const progressEvery = 50 * time.Millisecond

// maxProgressMessage bounds a report's message: it is a status line.
const maxProgressMessage = 1 << 10

// Progress passes a capability_progress from p, the peer answering the
// call, to the call's invoker, if it asked for progress (WithProgress).
// Nothing is journaled: progress is a hint. Only the peer the call was
// dispatched to may report, and only once it was dispatched.
func (s *Session) Progress(p Peer, m *protocol.CapabilityProgress) error {
	switch {
	case math.IsNaN(m.Progress) || math.IsInf(m.Progress, 0) || m.Progress < 0:
		return protocol.Errorf(protocol.CodeInvalidRequest, "capability_progress for %q: progress must be a finite number ≥ 0", m.CallID)
	case math.IsNaN(m.Total) || math.IsInf(m.Total, 0) || m.Total < 0:
		return protocol.Errorf(protocol.CodeInvalidRequest, "capability_progress for %q: total must be a finite number > 0, or absent", m.CallID)
	case len(m.Message) > maxProgressMessage:
		return protocol.Errorf(protocol.CodeInvalidRequest, "capability_progress for %q: the message is %d bytes, over %d", m.CallID, len(m.Message), maxProgressMessage)
	}
	s.mu.Lock()
	c, err := s.lookupCallLocked(m.CallID)
	switch {
	case err != nil:
		s.mu.Unlock()
		return err
	case !c.reg.owner.Same(p) || c.reg.handler != nil:
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeForbidden, "call %q to %q reports progress from its %s side, not from %s", m.CallID, c.name, c.reg.def[0].Side, p)
	case !c.dispatched:
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeConflict, "call %q has not been dispatched yet (it is awaiting approval)", m.CallID)
	}
	final := m.Total > 0 && m.Progress >= m.Total
	now := time.Now()
	if !final && now.Sub(c.lastProgress) < progressEvery {
		s.mu.Unlock()
		return nil
	}
	c.lastProgress = now
	fn := ProgressFunc(c.parent)
	s.mu.Unlock()
	if fn == nil {
		return nil
	}
	fn(Progress{Done: m.Progress, Total: m.Total, Message: m.Message})
	return nil
}
