package server

import (
	"context"
	"net/http"
	"sync"

	"github.com/brainrt/brain/session"
)

// sideMCP is the side under which MCP requests in flight are counted: an
// MCP caller holds a client token but is not a WebSocket client, and an
// operator reading the metrics wants the two apart.
const sideMCP session.PeerSide = "mcp"

// connCounts counts a server's open connections by peer side.
type connCounts struct {
	mu sync.Mutex
	by map[session.PeerSide]int
}

func (c *connCounts) add(side session.PeerSide, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[session.PeerSide]int{}
	}
	c.by[side] += n
}

// Connections returns the open connections by peer side: WebSocket
// connections as "client", "app", "environment" and "operator", and MCP
// requests in flight (a POST being answered, a GET holding its stream
// open) as "mcp". A side with none is absent until it had one, then 0.
func (srv *Server) Connections() map[string]int {
	srv.conns.mu.Lock()
	defer srv.conns.mu.Unlock()
	out := make(map[string]int, len(srv.conns.by))
	for side, n := range srv.conns.by {
		out[string(side)] = n
	}
	return out
}

// storedSessions is what a [Store] may offer to count hibernated sessions
// (package store has it).
type storedSessions interface {
	SessionCount(ctx context.Context) (int, error)
}

// Counts returns the sessions live in memory and those hibernated: stored
// and not in memory (0 without a store that counts its sessions, or when
// counting fails). Hibernated is the stored count less the live sessions:
// a live session that has stored nothing yet lowers it by one. The store
// counts from its index, read once (package store, index.go).
func (m *Manager) Counts(ctx context.Context) (live, hibernated int) {
	m.mu.Lock()
	live = len(m.live)
	m.mu.Unlock()
	st, ok := m.opts.Store.(storedSessions)
	if !ok || m.opts.Store == nil {
		return live, 0
	}
	n, err := st.SessionCount(ctx)
	if err != nil {
		m.log.Debug("count stored sessions", "error", err.Error())
		return live, 0
	}
	return live, max(0, n-live)
}

// handleMetrics serves Options.Metrics to an operator token only: the
// metrics name sessions' capabilities and reveal the kernel's load, which
// no client or app should read.
func (srv *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	p, ok := srv.opts.Tokens.Peer(bearerToken(r))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="brain"`)
		httpError(w, http.StatusUnauthorized, "unauthorized", "a valid operator token is required (Authorization: Bearer <token>)")
		return
	}
	if p.Side != session.SideOperator {
		httpError(w, http.StatusForbidden, "forbidden", "/metrics needs an operator token, not a "+string(p.Side)+" token")
		return
	}
	srv.opts.Metrics.ServeHTTP(w, r)
}
