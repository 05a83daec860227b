package server

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// A stop is not an event. A graceful stop — SIGTERM, the end of
// `brain serve` — never writes to a session's journal: a restarted node,
// or the node that takes the session over, restores it exactly as it was,
// with its approvals still pending, its peers' calls still waiting for
// their results, and no register or deregister event from tools leaving
// and coming back. The order (docs/operations.md, "Stopping"):
//
//  1. Stop: no session is opened or created any more (503, "the node is
//     stopping": a client reconnects, in a cluster to the session's next
//     owner); the tools that are running are given until the stop's bound
//     to finish, and their outcomes are journaled as usual; then every
//     session's journal is closed.
//  2. The connections end — WebSockets with close code 1001 and a reason,
//     MCP requests with their request — and whatever that causes in a
//     session (a caller going away, a peer's tools leaving) is dropped
//     with the closed journal: nobody sees it, nothing stores it.
//  3. Close: every session leaves memory as a hibernating one does (its
//     environment forgets it without deregistering anything) and, in a
//     cluster, its lease is released — before the store's connection
//     closes, so that another node takes it at once.

// ErrStopping is the cause of a stop: requests and connections of a
// stopping node end with it, and new ones are refused (503).
var ErrStopping = errors.New("the node is stopping")

// Stop begins a graceful stop: it refuses new sessions from now on, waits
// (until ctx ends) for the Go handlers running in the sessions — the
// environment's tools — to finish and for the MCP requests being answered
// to be answered (not those parked on an approval or a peer), and closes
// every session's journal, so that nothing that happens in memory from
// then on is stored or seen; then it ends the WebSocket connections (1001,
// "the node is stopping"). It returns once they are told; call
// [Manager.Close] after the other requests (MCP) have ended.
func (m *Manager) Stop(ctx context.Context) {
	m.mu.Lock()
	m.stopping.Store(true)
	m.mu.Unlock()
	for {
		running, answering := m.busy() // cluster_drain.go
		if running == 0 && answering == 0 {
			break
		}
		select {
		case <-ctx.Done():
			m.log.Warn("stopping with tools still running or requests being answered: their calls end unavailable when the sessions are restored",
				slog.Int("running", running), slog.Int("answering", answering))
		case <-time.After(20 * time.Millisecond): // polling a count for at most the stop's bound
			continue
		}
		break
	}
	m.journals.mu.Lock()
	for _, cj := range m.journals.by {
		cj.closed.Store(true)
	}
	m.journals.mu.Unlock()
	m.log.Info("sessions' journals closed for the stop")
	// Then the WebSocket connections end, with 1001 (ws.go): they outlive
	// their requests, so the end of the requests does not end them.
	m.mu.Lock()
	var conns []*conn
	for _, e := range m.live {
		for c := range e.conns {
			conns = append(conns, c)
		}
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.cancel(ErrStopping)
	}
}

// Close ends a stop begun with [Manager.Stop]: every session leaves memory
// (ManagerOptions.Release, as for a hibernating one) and its lease, in a
// cluster, is released within ctx; with a [Checkpointer] store each is
// then checkpointed, for at most 2 s within ctx. Release errors are
// returned joined.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.stopping.Store(true)
	entries := make([]*managed, 0, len(m.live))
	for id, e := range m.live {
		select {
		case <-e.ready:
		default:
			continue
		}
		delete(m.live, id)
		if e.err == nil {
			entries = append(entries, e)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, e := range entries {
		// Whoever still waits in this process for a call (an MCP request
		// the transport keeps on its own connection, the model loop) is
		// told the node is stopping; the journal is closed, so the call
		// stays pending in it for the next start or owner.
		for _, c := range e.s.Snapshot().PendingCalls {
			_ = e.s.Cancel(c.CallID, "the node is stopping")
		}
		if m.opts.Release != nil {
			m.opts.Release(e.s)
		}
		m.journals.untrack(e.s)
		if e.lease != nil {
			if err := e.lease.Release(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.log.Info("sessions released for the stop", slog.Int("sessions", len(entries)))
	if m.checkpoints != nil {
		// Checkpointed as hibernating sessions are — a checkpoint is not
		// an event: nothing is written into a session — so that they wake
		// fast after the restart, for at most stopCheckpoints: those
		// left wake from their events.
		ids := make([]string, len(entries))
		for i, e := range entries {
			ids[i] = e.id
		}
		cctx, cancel := context.WithTimeout(ctx, stopCheckpoints)
		written, left := m.checkpoints.drain(cctx, ids)
		cancel()
		m.log.Info("sessions checkpointed for the stop", slog.Int("done", written), slog.Int("left", left))
	}
	return errors.Join(errs...)
}

// stopCheckpoints bounds the checkpoints a stop writes (Close): a
// session of a thousand events takes a few milliseconds, one with nothing
// new since its last checkpoint a fraction of one.
const stopCheckpoints = 2 * time.Second

// liveEntries returns the sessions in memory and ready.
func (m *Manager) liveEntries() []*managed {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*managed, 0, len(m.live))
	for _, e := range m.live {
		select {
		case <-e.ready:
			if e.err == nil {
				out = append(out, e)
			}
		default:
		}
	}
	return out
}
