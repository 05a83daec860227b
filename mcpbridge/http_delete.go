package mcpbridge

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// A host ends an MCP session with DELETE (Streamable HTTP, "Session
// Management"). The SDK closes the session only once its requests in
// flight return, and a tools/call parked on an approval or a peer returns
// when the call ends by itself — minutes later: a host's shutdown hung
// on it, and the call went on for nobody. So a DELETE first cancels the
// POSTs in flight on that MCP session (their calls end cancelled, as when
// the caller goes away) and waits for them, at most releaseGrace.
//
// MCP session ids carry their state (sessionid.go): any node restores an
// id it does not know, which made a DELETE change nothing — the id kept
// working. A DELETEd id is remembered by the endpoint (the latest
// maxEndedIDs of them) and never restored again: answered 404, as the
// spec says. The memory is the node's, for as long as the session stays
// on it: after a restart or a handover, a deleted id is restored again.

// maxEndedIDs bounds the DELETEd MCP session ids an endpoint remembers.
const maxEndedIDs = 1024

// mcpSessions are an endpoint's POSTs in flight by MCP session id, and the
// ids DELETEd.
type mcpSessions struct {
	mu       sync.Mutex
	inflight map[string]map[*inflightPost]struct{}
	ended    map[string]struct{}
	order    []string // ended, oldest first
}

type inflightPost struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// track registers a POST on MCP session sid and returns its context, and
// what to call when it has been served.
func (m *mcpSessions) track(r *http.Request, sid string) (*http.Request, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	p := &inflightPost{cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	if m.inflight == nil {
		m.inflight = map[string]map[*inflightPost]struct{}{}
	}
	if m.inflight[sid] == nil {
		m.inflight[sid] = map[*inflightPost]struct{}{}
	}
	m.inflight[sid][p] = struct{}{}
	m.mu.Unlock()
	return r.WithContext(ctx), func() {
		m.mu.Lock()
		delete(m.inflight[sid], p)
		if len(m.inflight[sid]) == 0 {
			delete(m.inflight, sid)
		}
		m.mu.Unlock()
		cancel()
		close(p.done)
	}
}

// end records sid as DELETEd, cancels its POSTs in flight and waits for
// them to be served, at most grace.
func (m *mcpSessions) end(sid string, grace time.Duration) {
	m.mu.Lock()
	if m.ended == nil {
		m.ended = map[string]struct{}{}
	}
	if _, ok := m.ended[sid]; !ok {
		m.ended[sid] = struct{}{}
		m.order = append(m.order, sid)
		if len(m.order) > maxEndedIDs {
			delete(m.ended, m.order[0])
			m.order = m.order[1:]
		}
	}
	posts := make([]*inflightPost, 0, len(m.inflight[sid]))
	for p := range m.inflight[sid] {
		posts = append(posts, p)
	}
	m.mu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	for _, p := range posts {
		p.cancel()
	}
	for _, p := range posts {
		select {
		case <-p.done:
		case <-t.C:
			return
		}
	}
}

// isEnded reports whether sid was DELETEd (and is still remembered).
func (m *mcpSessions) isEnded(sid string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ended[sid]
	return ok
}
