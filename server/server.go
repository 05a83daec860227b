package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Options configure a [Server].
type Options struct {
	// Tokens authenticate every endpoint; required.
	Tokens *Tokens
	// Manager owns the sessions; required.
	Manager *Manager
	// MCP, if set, serves a session's MCP endpoint (package mcpbridge).
	MCP func(s *session.Session) http.Handler
	// OriginPatterns lists the browser origins allowed to open WebSockets
	// (coder/websocket's AcceptOptions.OriginPatterns); empty allows only
	// same-origin browsers and any non-browser client.
	OriginPatterns []string
	// WriteTimeout bounds one frame write to a peer; a peer that does not
	// read for that long is disconnected. Default 10 s.
	WriteTimeout time.Duration
	// Logger receives the server's logs; nil discards.
	Logger *slog.Logger
	// Metrics, if set, is served at GET /metrics to operator tokens only
	// (internal/telemetry's Handler).
	Metrics http.Handler
}

// Server is the kernel's HTTP handler:
//
//	GET  /v1/sessions/{id}/ws    WebSocket for the client and app sides
//	     /v1/sessions/{id}/mcp   MCP (Streamable HTTP) for agent drivers
//	GET  /v1/sessions/{id}       the session's snapshot (JSON)
//	GET  /healthz                liveness, unauthenticated
//	GET  /metrics                Prometheus metrics (Options.Metrics), operator token
//
// Every /v1 endpoint needs a token — "Authorization: Bearer <token>", or
// ?token= on a WebSocket handshake (browsers cannot set headers there; no
// other endpoint accepts a token in its URL) — and the token decides the
// side the connection speaks for.
type Server struct {
	opts  Options
	log   *slog.Logger
	mux   *http.ServeMux
	conns connCounts // open WebSocket connections by side (stats.go)
}

// New returns a server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	srv := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	srv.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv.mux.HandleFunc("GET /v1/sessions/{id}/ws", srv.withSession(srv.handleWS))
	srv.routeSessionsAPI() // GET /v1/sessions[/{id}], DELETE, frames, approvals (api_sessions.go)
	srv.mux.HandleFunc("/v1/sessions/{id}/mcp", srv.withSession(srv.handleMCP))
	srv.mux.HandleFunc("GET /v1/sessions/{id}/conversation", srv.authenticated(false, srv.handleConversation))
	if opts.Metrics != nil {
		srv.mux.HandleFunc("GET /metrics", srv.handleMetrics) // operator tokens only (stats.go)
	}
	return srv
}

// handleConversation is GET /v1/sessions/{id}/conversation: the session's
// conversation and turn (docs/protocol.md, "Turns and the conversation"),
// for the client and operators; apps and environments see only their own
// calls, so not the conversation. It creates no session.
func (srv *Server) handleConversation(w http.ResponseWriter, r *http.Request, p session.Peer) {
	if p.Side != session.SideClient && p.Side != session.SideOperator {
		httpError(w, http.StatusForbidden, "forbidden", "the conversation is for client and operator tokens")
		return
	}
	s, release, ok := srv.openSession(w, r, r.PathValue("id"), p, false)
	if !ok {
		return
	}
	defer release()
	turn, running := s.CurrentTurn()
	writeJSON(w, http.StatusOK, map[string]any{"turn": turn, "running": running, "messages": s.Conversation()})
}

// ServeHTTP serves the routes above.
func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { srv.mux.ServeHTTP(w, r) }

type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session.Session, p session.Peer)

// withSession authenticates the request and acquires its session for the
// duration of the handler.
func (srv *Server) withSession(h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r) // ?token= on WebSocket handshakes only (auth.go)
		p, ok := srv.peerFor(r, token)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="brain"`)
			httpError(w, http.StatusUnauthorized, "unauthorized", "a valid token is required (Authorization: Bearer <token>)")
			return
		}
		id := r.PathValue("id")
		if !ValidSessionID(id) {
			httpError(w, http.StatusBadRequest, "invalid_request", "invalid session id: use 1 to 128 of A-Z a-z 0-9 _ -")
			return
		}
		if p.Side == session.SideOperator { // an operator never creates a session
			s, release, ok := srv.openSession(w, r, id, p, false)
			if ok {
				defer release()
				h(w, r, s, p)
			}
			return
		}
		s, release, err := srv.opts.Manager.Acquire(withOwner(r.Context(), ownerKey(token)), id)
		var perr *protocol.Error
		if errors.As(err, &perr) && perr.Code == protocol.CodeQuotaExceeded {
			httpError(w, http.StatusTooManyRequests, string(perr.Code), perr.Message)
			return
		}
		if srv.forward(w, r, err) { // owned by another node (cluster.go)
			return
		}
		if err != nil {
			srv.log.Error("acquire session", slog.String("session", id), slog.String("error", err.Error()))
			httpError(w, http.StatusServiceUnavailable, "unavailable", "the session cannot be opened")
			return
		}
		defer release()
		h(w, r, s, p)
	}
}

func (srv *Server) handleWS(w http.ResponseWriter, r *http.Request, s *session.Session, p session.Peer) {
	ctx, done := srv.opts.Manager.connect(r.Context(), s.ID(), p.Side) // counted in the sessions list; Delete ends it
	defer done()
	srv.serveWS(ctx, w, r, s, p)
}

func (srv *Server) handleMCP(w http.ResponseWriter, r *http.Request, s *session.Session, p session.Peer) {
	if srv.opts.MCP == nil {
		httpError(w, http.StatusNotFound, "not_found", "this kernel serves no MCP endpoint")
		return
	}
	if p.Side != session.SideClient {
		httpError(w, http.StatusForbidden, "forbidden", "the MCP endpoint needs a client token")
		return
	}
	// An MCP request in flight (a POST being answered, or the GET that
	// holds a session's event stream open) is an open connection of the
	// MCP side, counted beside the WebSocket ones.
	srv.conns.add(sideMCP, 1)
	defer srv.conns.add(sideMCP, -1)
	srv.opts.MCP(s).ServeHTTP(w, r)
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

// Serve runs srv on l until ctx ends, then shuts down gracefully (open
// WebSocket connections are closed when their requests' contexts end).
func Serve(ctx context.Context, srv *http.Server, l net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10e9)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
