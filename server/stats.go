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
	Sessions(ctx context.Context) ([]string, error)
}

// Counts returns the sessions live in memory and those hibernated: stored
// and not in memory (0 without a store that lists its sessions, or when
// listing fails). Listing reads the store: its cost grows with the number
// of sessions.
func (m *Manager) Counts(ctx context.Context) (live, hibernated int) {
	m.mu.Lock()
	live = len(m.live)
	inMemory := make(map[string]bool, len(m.live))
	for id := range m.live {
		inMemory[id] = true
	}
	m.mu.Unlock()
	st, ok := m.opts.Store.(storedSessions)
	if !ok || m.opts.Store == nil {
		return live, 0
	}
	ids, err := st.Sessions(ctx)
	if err != nil {
		m.log.Debug("count stored sessions", "error", err.Error())
		return live, 0
	}
	for _, id := range ids {
		if !inMemory[id] {
			hibernated++
		}
	}
	return live, hibernated
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
