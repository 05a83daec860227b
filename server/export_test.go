package server

import "time"

// RunningWriters returns how many connection writers run (ws.go).
func RunningWriters() int64 { return writersRunning.Load() }

// SetIdleTick makes writers idle out after d instead of a second, for
// the test's duration.
func SetIdleTick(t interface{ Cleanup(func()) }, d time.Duration) {
	setTunable(t, idleTick, d)
}

// SetHandOffFor makes a connection read its frames on its own goroutine
// from d after its peer's idle spell (or its first frame) instead of
// 100 ms, for the test's duration (ws.go, readFrameWhere).
func SetHandOffFor(t interface{ Cleanup(func()) }, d time.Duration) {
	setTunable(t, handOffFor, d)
}

// IdleRunners returns how many of the manager's shared call runners are
// idle (sessions.go).
func (m *Manager) IdleRunners() int { return m.runners.Idle() }

// IdleFrameReaders returns how many of the server's shared frame readers
// are idle (ws.go, readFrameWhere).
func (s *Server) IdleFrameReaders() int { return s.frames.Idle() }

// SetFrameReadTimeout bounds a frame's arrival, once begun, by d instead
// of a minute, for the test's duration (wsframetime.go).
func SetFrameReadTimeout(t interface{ Cleanup(func()) }, d time.Duration) {
	setTunable(t, frameReadTimeout, d)
}

// SetBodyWithin bounds a request body's arrival to d instead of a minute,
// for the test's duration.
func SetBodyWithin(t interface{ Cleanup(func()) }, d time.Duration) {
	setTunable(t, bodyWithin, d)
}

// setTunable sets v to d for the test's duration.
func setTunable(t interface{ Cleanup(func()) }, v *tunable, d time.Duration) {
	old := v.ns.Swap(int64(d))
	t.Cleanup(func() { v.ns.Store(old) })
}

// SetWriterStarts makes f run as each connection's writer starts, with
// the count of the replies the writer has waiting, for the test's
// duration (ws.go, writeLoop).
func SetWriterStarts(t interface{ Cleanup(func()) }, f func(replies func() int)) {
	writerStarts.Store(&f)
	t.Cleanup(func() { writerStarts.Store(nil) })
}

// SetJournalFaultFor makes /readyz report a single node's journal failure
// for d instead of 30 s, for the test's duration (storefault.go).
func SetJournalFaultFor(t interface{ Cleanup(func()) }, d time.Duration) {
	setTunable(t, journalFaultFor, d)
}

// CheckpointsWritten waits until the checkpoints of the sessions
// hibernated so far are written (checkpoints.go), or ctx ends.
func (m *Manager) CheckpointsWritten(ctx interface{ Done() <-chan struct{} }) bool {
	for {
		m.checkpoints.mu.Lock()
		done, running := m.checkpoints.done, m.checkpoints.running
		m.checkpoints.mu.Unlock()
		if !running {
			return true
		}
		select {
		case <-done:
		case <-ctx.Done():
			return false
		}
	}
}
