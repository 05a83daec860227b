package mcpbridge

import (
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/session"
)

// HTTPHandler serves sessions over MCP's Streamable HTTP transport, one MCP
// server per session (see [Handler]). It is safe for concurrent use.
type HTTPHandler struct {
	opts       ServerOptions
	getSession func(*http.Request) *session.Session

	mu      sync.Mutex
	servers map[*session.Session]*endpoint
	closed  bool
}

// endpoint is one session's MCP server and its transport handler. Each
// session has its own transport handler, whose MCP session ids are its own:
// an id obtained on one session's endpoint means nothing on another's.
type endpoint struct {
	srv *Server
	h   *mcp.StreamableHTTPHandler

	posts    sync.WaitGroup // POSTs being served: Release lets them deliver
	sessions mcpSessions    // POSTs by MCP session, and the ids DELETEd (http_delete.go)
}

// mcpSessionHeader is the Streamable HTTP transport's session id header.
const mcpSessionHeader = "Mcp-Session-Id"

// serve serves one request on e, counting POSTs; a DELETE cancels its MCP
// session's POSTs first (http_delete.go).
func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(mcpSessionHeader)
	switch r.Method {
	case http.MethodPost:
		e.posts.Add(1)
		defer e.posts.Done()
		if sid != "" {
			var served func()
			r, served = e.sessions.track(r, sid)
			defer served()
		}
	case http.MethodDelete:
		if sid != "" {
			e.sessions.end(sid, releaseGrace)
		}
	}
	e.h.ServeHTTP(w, r)
}

// releaseGrace bounds how long Release waits for the POSTs in flight to
// deliver their responses (calls that ended — a Delete cancels them first
// — or that Close answered unavailable) before it closes the MCP sessions
// under them: a response written after its session closed never reaches
// the client.
const releaseGrace = 2 * time.Second

// Handler returns an http.Handler serving the Streamable HTTP transport for
// the session getSession picks for each request, so that a kernel can mount
// one endpoint per session:
//
//	h := mcpbridge.Handler(func(r *http.Request) *session.Session {
//		return sessions[r.PathValue("id")] // nil: 400 Bad Request
//	}, nil)
//	defer h.Close()
//	mux.Handle("/sessions/{id}/mcp", h)
//
// The first request for a session creates its [Server] (see [NewServer] for
// the mapping); later requests, and every MCP session opened on it, share
// it. Each session's endpoint keeps its own MCP session ids, so an id
// obtained on one session's endpoint is unknown on another's.
// getSession is called on every request and must be cheap; returning nil
// refuses the request with 400 Bad Request. It may be nil when requests
// reach the handler only through [HTTPHandler.Endpoint]. opts.HTTP
// configures the transport.
func Handler(getSession func(*http.Request) *session.Session, opts *ServerOptions) *HTTPHandler {
	return &HTTPHandler{opts: opts.withDefaults(), getSession: getSession, servers: map[*session.Session]*endpoint{}}
}

// ServeHTTP serves one request of the Streamable HTTP transport on the
// endpoint of the session getSession picks for it.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e *endpoint
	if h.getSession != nil {
		if s := h.getSession(r); s != nil {
			e = h.endpoint(s)
		}
	}
	if e == nil {
		http.Error(w, "no such session", http.StatusBadRequest)
		return
	}
	e.serve(w, r)
}

// Endpoint returns the Streamable HTTP handler of s, for a router that has
// resolved (and authorized) the session itself:
//
//	server.Options{MCP: h.Endpoint} // func(*session.Session) http.Handler
//
// Requests reach the same endpoint as ServeHTTP's for s; after Release(s),
// a fresh one. After Close they are refused with 400 Bad Request.
func (h *HTTPHandler) Endpoint(s *session.Session) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := h.endpoint(s)
		if e == nil {
			http.Error(w, "no such session", http.StatusBadRequest)
			return
		}
		e.serve(w, r)
	})
}

// endpoint returns the endpoint of s, creating it on first use; nil when h
// is closed.
func (h *HTTPHandler) endpoint(s *session.Session) *endpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	e, ok := h.servers[s]
	if !ok {
		srv := NewServer(s, &h.opts)
		var ho mcp.StreamableHTTPOptions
		if h.opts.HTTP != nil {
			ho = *h.opts.HTTP
		}
		// MCP session ids that any node can serve (sessionid.go).
		id := s.ID()
		ho.NewSessionID = func(_ *http.Request, p *mcp.InitializeParams) string { return newSessionID(id, p) }
		var ended *mcpSessions // set below: the endpoint's
		ho.RestoreSession = func(_ *http.Request, sid string) *mcp.ServerSessionState {
			if ended.isEnded(sid) {
				return nil // DELETEd: 404 (http_delete.go)
			}
			return restoreState(id, sid)
		}
		// Once connected, a restored MCP session hears list_changed: its
		// client may have missed changes while no node served it.
		ho.SessionRestored = func(*mcp.ServerSession) { srv.restored() }
		// What stdio refuses, HTTP refuses (http_vet.go).
		ho.CheckBody = vetBody
		e = &endpoint{srv: srv}
		ended = &e.sessions
		e.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, &ho)
		h.servers[s] = e
	}
	return e
}

// Release stops serving s: its MCP sessions are closed and its registry is
// no longer followed. Call it when the session ends. A later request for s
// starts afresh.
func (h *HTTPHandler) Release(s *session.Session) {
	h.mu.Lock()
	e := h.servers[s]
	delete(h.servers, s)
	h.mu.Unlock()
	if e != nil {
		e.release()
	}
}

// release closes e's server, letting the POSTs in flight deliver first
// (bounded by releaseGrace).
func (e *endpoint) release() {
	e.srv.detach() // handlers waiting on calls answer now
	delivered := make(chan struct{})
	go func() { e.posts.Wait(); close(delivered) }()
	t := time.NewTimer(releaseGrace)
	select {
	case <-delivered:
	case <-t.C:
	}
	t.Stop()
	_ = e.srv.Close()
}

// Detach has every endpoint's tools/call handlers that wait on a call —
// parked on an approval or a peer's result — answer at once, unavailable,
// leaving the call pending in its session, without closing the MCP
// sessions: a stopping node calls it before its HTTP server shuts down,
// so that those POSTs end with their answer instead of being cut at the
// stop's bound with an empty stream (a host then waits out its own
// timeout). New calls on a detached endpoint are answered unavailable.
// It returns once the POSTs in flight have been answered, or after
// releaseGrace.
func (h *HTTPHandler) Detach() {
	h.mu.Lock()
	endpoints := make([]*endpoint, 0, len(h.servers))
	for _, e := range h.servers {
		e.srv.detach()
		endpoints = append(endpoints, e)
	}
	h.mu.Unlock()
	delivered := make(chan struct{})
	go func() {
		for _, e := range endpoints {
			e.posts.Wait()
		}
		close(delivered)
	}()
	t := time.NewTimer(releaseGrace)
	defer t.Stop()
	select {
	case <-delivered:
	case <-t.C:
	}
}

// Close releases every session; later requests are refused with 400 Bad
// Request.
func (h *HTTPHandler) Close() error {
	h.mu.Lock()
	h.closed = true
	servers := h.servers
	h.servers = nil
	h.mu.Unlock()
	for _, e := range servers {
		e.release()
	}
	return nil
}
