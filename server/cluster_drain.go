package server

import "sync"

// A stop answers the requests it can.
//
// Why: a graceful stop waited only for the environment's tools that were
// running, then closed the sessions' journals and ended every request. An
// MCP tools/call that had reached the session a moment earlier — its
// request read, its tool not started yet, or its result not yet written —
// was cut: its tool ran in memory with nothing journaled, or its answer
// never left, and the client got "request terminated without response"
// (in a cluster, through another node, too: the forwarding node cannot
// tell such a request from one that was served). A stop now also waits,
// within its bound, for the MCP POSTs being answered, except those parked
// on a call that waits for an approval or a peer's result: the next owner
// resumes those, and they are answered unavailable as before. A POST that
// arrives once the stop has begun is refused unserved (503 with
// notServedHeader), and a forwarding node sends it to the next owner
// (cluster_retry.go).

// enterRequest counts a request a stop waits for (an MCP POST) until the
// returned function is called; it reports false once the node is
// stopping, and the request must then be refused unserved.
func (m *Manager) enterRequest() (func(), bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping.Load() {
		return nil, false
	}
	m.requests++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.requests--
			m.mu.Unlock()
		})
	}, true
}

// busy counts what a stop waits for: the Go handlers running in the
// sessions, and the requests being answered beyond those parked on a call
// that waits for an approval or a peer (each such call may hold one). The
// count of parked calls is the sessions' and includes calls no request
// holds (a WebSocket peer's invocation), so a stop may end a request
// early when both are in one session: it is then answered as a parked one
// is, and its call is left pending.
func (m *Manager) busy() (running, answering int) {
	parked := 0
	for _, e := range m.liveEntries() {
		h := e.s.RunningHandlers()
		running += h
		parked += max(0, e.s.PendingCalls()-h)
	}
	m.mu.Lock()
	n := m.requests
	m.mu.Unlock()
	return running, max(0, n-parked)
}
