package session

import (
	"context"
	"time"

	"github.com/brainrt/brain/protocol"
)

// A call is its own handler's context: Done is the call's done channel,
// closed when the call finishes for any reason (result, timeout, cancel,
// the caller giving up). Why: a context.WithTimeout per call costs four
// allocations and a timer on the hottest path; the call already has a done
// channel, and the bridge's waiter already enforces the timeout.

// Deadline returns the earlier of the caller's deadline and the call's
// timeout.
func (c *call) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done is closed when the call has finished.
func (c *call) Done() <-chan struct{} { return c.done }

// Err is nil while the call runs, then context.DeadlineExceeded when it
// ended with timeout and context.Canceled otherwise.
func (c *call) Err() error {
	select {
	case <-c.done:
		if !c.outcome.IsOK() && c.outcome.Err.Code == protocol.CodeTimeout {
			return context.DeadlineExceeded
		}
		return context.Canceled
	default:
		return nil
	}
}

// Value returns the caller's context values.
func (c *call) Value(key any) any { return c.parent.Value(key) }

// workerIdle is how long an idle handler goroutine waits for the next call
// before it exits.
const workerIdle = 10 * time.Second

// dispatch runs c's handler on a reused worker goroutine (internal/workers):
// off the caller's goroutine, so that a handler ignoring its context cannot
// hold the caller past the call's end.
func (s *Session) dispatch(c *call) {
	if s.opts.Go != nil {
		s.opts.Go(func() { s.runCall(c) })
		return
	}
	s.workers.Submit(c)
}

// runCall is the workers' job: run the handler, finish the call.
func (s *Session) runCall(c *call) { s.finish(c, s.callHandler(c, c)) }

// newStoppedTimer makes the timers of Session.timers. The pool is per
// session, not global: a timer made inside a testing/synctest bubble must
// never be used outside it (the runtime aborts the process), and a session,
// whose channels belong to the bubble that created it, stays in that bubble.
func newStoppedTimer() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// await waits until c finishes, its timeout passes or ctx is done, and
// finishes it accordingly.
func (s *Session) await(ctx context.Context, c *call) {
	t := s.timers.Get().(*time.Timer)
	t.Reset(c.reg.timeout)
	select {
	case <-c.done:
	case <-t.C:
		s.finish(c, protocol.Fail(protocol.CodeTimeout, "no result within %s", c.reg.timeout))
	case <-ctx.Done():
		s.finish(c, contextOutcome(ctx, 0))
	}
	t.Stop()
	s.timers.Put(t)
	<-c.done
}
