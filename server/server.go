package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/cors"

	"github.com/brainrt/brain/internal/textcut"
	"github.com/brainrt/brain/internal/workers"
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
	// OriginPatterns lists the browser origins of other sites allowed to
	// open WebSockets and use the API and the MCP endpoint, CORS included
	// (coder/websocket's AcceptOptions.OriginPatterns: a host, or
	// scheme://host with "://", path.Match wildcards); empty allows only
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
	// Ready, if set, says whether the session store can serve (nil) or
	// what is wrong with it, for GET /readyz (storefault.go).
	Ready func() error
}

// Server is the kernel's HTTP handler:
//
//	GET  /v1/sessions/{id}/ws    WebSocket for the client and app sides
//	     /v1/sessions/{id}/mcp   MCP (Streamable HTTP) for agent drivers
//	GET  /v1/sessions/{id}       the session's snapshot (JSON)
//	GET  /healthz                liveness, unauthenticated
//	GET  /readyz                 readiness (stopping, the store), unauthenticated
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
	// frames reads the frames of connections whose peers were just idle
	// (ws.go, readFrameWhere), on goroutines shared by all of them.
	frames *workers.Pool[*wsConn]
	// forwardWarned is when each owner's unreachability was last logged
	// at warn (cluster.go, forwardWarn).
	forwardWarned sync.Map // node id → time.Time
	// cors answers the CORS requests of the pages OriginPatterns lets in
	// (origin.go); nil without patterns.
	cors *cors.Cors
	// originsRefused is the log of refused Origins' window (origin.go).
	originsRefused refusedOrigins
}

// New returns a server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	srv := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), frames: workers.New(readHandedFrame, runnerIdle)}
	srv.cors = srv.newCORS(opts.OriginPatterns)
	srv.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv.mux.HandleFunc("GET /readyz", srv.handleReady) // storefault.go
	srv.mux.HandleFunc("GET /v1/sessions/{id}/ws", srv.withSession(srv.joinWS, srv.handleWS))
	srv.routeSessionsAPI() // GET /v1/sessions[/{id}], DELETE, frames, approvals (api_sessions.go)
	srv.mux.HandleFunc(mcpPattern, srv.withSession(srv.joinMCP, srv.handleMCP))
	srv.mux.HandleFunc("GET /v1/sessions/{id}/conversation", srv.authenticated(clients, srv.handleConversation))
	if opts.Metrics != nil {
		srv.mux.HandleFunc("GET /metrics", srv.handleMetrics) // operator tokens only (stats.go)
	}
	return srv
}

// handleConversation is GET /v1/sessions/{id}/conversation: the session's
// conversation and turn (docs/protocol.md, "Turns and the conversation"),
// for the client and operators; apps and environments see only their own
// calls, so not the conversation. It creates no session. With ?after=N
// it answers the messages added, and the turns started or ended, after
// seq N (session.ConversationState).
func (srv *Server) handleConversation(w http.ResponseWriter, r *http.Request, pr Principal) {
	var after uint64
	if v := r.URL.Query().Get("after"); v != "" {
		var err error
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			httpError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("after %q: want a seq (a non-negative integer)", textcut.Cut(v, 32)))
			return
		}
	}
	s, release, ok := srv.openSession(w, r, r.PathValue("id"), pr, false)
	if !ok {
		return
	}
	defer release()
	writeJSON(w, http.StatusOK, s.ConversationAfter(after))
}

// ServeHTTP serves the routes above, and the CORS requests of the pages
// of other sites Options.OriginPatterns lets in. A request another node
// forwarded had its CORS answered there: answered again, its response
// would carry each header twice, which a browser refuses.
func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values("Origin")) > 1 {
		// A browser sends one; with two, the CORS answer echoed both,
		// the unlisted one among them (an adversarial probe).
		httpError(w, http.StatusBadRequest, "invalid_request", "two Origin headers: a request has one")
		return
	}
	if srv.cors != nil && r.Header.Get("Origin") != "" && r.Header.Get(forwardedHeader) == "" {
		if r.Method == http.MethodOptions && asksInternalHeaders(r.Header.Get("Access-Control-Request-Headers")) {
			// A page's fetch may send any header but the ones a kernel
			// and its proxies set (a re-probe found them allowed).
			httpError(w, http.StatusForbidden, "forbidden", "a page may not send the headers a cluster node or a proxy sets ("+forwardedHeader+", "+forwardedHostHeader+", "+mcpCallerHeader+", X-Forwarded-Host, Forwarded)")
			return
		}
		srv.cors.ServeHTTP(w, r, srv.serve)
		return
	}
	if srv.cors == nil && r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" && crossOrigin(r, nil) != "" {
		// A page of another site asks a kernel that lists none: its fetch
		// fails in the browser as a CORS error; the log says which site.
		srv.originRefused(r, r.Header.Get("Origin"))
	}
	srv.serve(w, r)
}

// asksInternalHeaders reports whether a preflight's
// Access-Control-Request-Headers names a header brain's nodes or a proxy
// in front of it set, which no page may.
func asksInternalHeaders(list string) bool {
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		for _, internal := range []string{forwardedHeader, forwardedHostHeader, mcpCallerHeader, "X-Forwarded-Host", "Forwarded"} {
			if strings.EqualFold(h, internal) {
				return true
			}
		}
	}
	return false
}

// serve serves the routes above.
func (srv *Server) serve(w http.ResponseWriter, r *http.Request) {
	if srv.retriesForwards(r) { // a cluster's forwards ride a handover out (cluster_retry.go)
		srv.serveRetrying(w, r)
		return
	}
	srv.mux.ServeHTTP(w, r)
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session.Session, pr Principal)

// withSession authenticates the request, admits its token (admit
// answers a refusal before anything is acquired or created, and says
// whether the request may create its session), and acquires its session
// for the duration of the handler: a session of another tenant is 404, as
// if it did not exist; one that never existed is created for the token's
// tenant when admit allows (operators never create one).
func (srv *Server) withSession(admit admitFunc, h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr, ok := srv.authenticate(r)
		if !ok {
			unauthenticated(w, r)
			return
		}
		id := r.PathValue("id")
		if !ValidSessionID(id) {
			httpError(w, http.StatusBadRequest, "invalid_request", "invalid session id: use 1 to 128 of A-Z a-z 0-9 _ -")
			return
		}
		create, ok := admit(w, r, pr)
		if !ok {
			return
		}
		r = srv.withTokenEnd(r) // its socket closes if the token is revoked (tokens_end.go)
		s, release, err := srv.opts.Manager.AcquireAs(r.Context(), pr, id, create == createAlways)
		joined := create == createAlways // asked to create the session if it never existed
		if create == createIfInitialize && errors.Is(err, ErrNotFound) {
			// Read the body only now: a request for a session that
			// exists (or that another node owns, forwarded unread) is
			// read as it is served.
			body, ok := readMCPBody(w, r)
			if !ok {
				return
			}
			if r.Header.Get("Mcp-Session-Id") == "" && isInitialize(body) {
				s, release, err = srv.opts.Manager.AcquireAs(r.Context(), pr, id, true)
				joined = true
			}
		}
		switch {
		case joined && !pr.Operator() && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrDeleted)):
			// A join creates a session that never existed, so one refused
			// names an id that is taken: another tenant's session, or a
			// deleted one (whose tenant was not kept). Both are told
			// alike, so that no tenant learns which ids another deleted.
			httpError(w, http.StatusNotFound, "not_found", "no session "+id+" for this token: the id is another tenant's, or its session was deleted (a deleted session's id is used again only by POST /v1/sessions); choose another id")
			return
		case r.Pattern == mcpPattern && errors.Is(err, ErrNotFound):
			httpError(w, http.StatusNotFound, "not_found", "no session "+id+": an MCP client's initialize (a POST without Mcp-Session-Id) starts it, unless its id is another tenant's or its session was deleted")
			return
		case pr.Peer.Side == session.SideOperator && errors.Is(err, ErrNotFound):
			httpError(w, http.StatusNotFound, "not_found", "no session "+id+": an operator joins sessions that exist; a client's connection, or POST /v1/sessions, creates one")
			return
		}
		if !srv.acquireFailed(w, r, id, err) {
			return
		}
		defer release()
		h(w, r, s, pr)
	}
}

// An admitFunc admits a request's token before its session is acquired,
// answering a refusal itself (ok false), and says whether the request may
// create its session when it never existed. A request refused must create
// nothing: a probe found that 403s, 400s and 404s had created the sessions
// they named, taking the ids and places in their tenants' quotas.
type admitFunc func(w http.ResponseWriter, r *http.Request, pr Principal) (create createMode, ok bool)

// createMode says when a request creates the session it names.
type createMode int

const (
	createNever        createMode = iota
	createAlways                  // a WebSocket connection
	createIfInitialize            // an MCP initialize (joinMCP)
)

// joinWS admits a WebSocket connection: it creates its session when it
// never existed — a resume too (?after=), so that a client whose kernel
// lost its data starts again (the snapshot it gets says the seq went
// back). A deleted session is never created again by a connection
// (tenancy.go).
func (srv *Server) joinWS(w http.ResponseWriter, r *http.Request, pr Principal) (createMode, bool) {
	// A browser page of another site is refused before the session is
	// made (Accept would refuse it after, leaving the session behind), and
	// told how a kernel lets it in.
	if !srv.sameOrListedOrigin(w, r) {
		return createNever, false
	}
	if status, why := handshakeProblem(r); why != "" {
		// Accept would refuse it after the session was made (a plain GET,
		// a missing key: an adversarial probe made sessions so).
		if status == http.StatusUpgradeRequired {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "websocket")
		}
		httpError(w, status, "invalid_request", why)
		return createNever, false
	}
	if pr.Model {
		httpError(w, http.StatusForbidden, "forbidden", modelOnlyMCP)
		return createNever, false
	}
	return createAlways, true
}

// mcpCallerHeader is mcpbridge.CallerHeader (this package does not import
// mcpbridge): the authenticated name of an MCP request's token.
const mcpCallerHeader = "Brain-Mcp-Caller"

// maxMCPBody is the largest MCP POST body: the MCP SDK's default
// (mcp.DefaultMaxRequestBodyBytes), which the kernel does not change.
const maxMCPBody = 4 << 20

// readMCPBody reads an MCP POST's body whole (readBody) and puts it back
// as r.Body, marked read.
func readMCPBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, ok := readBody(w, r, maxMCPBody, "too_large", fmt.Sprintf("the request's body is over %d bytes", maxMCPBody))
	if ok {
		r.Body = mcpBody{bytes.NewReader(body)}
	}
	return body, ok
}

// mcpPattern is the MCP endpoint's route.
const mcpPattern = "/v1/sessions/{id}/mcp"

// mcpBody is an MCP POST's body once read whole (readMCPBody).
type mcpBody struct{ *bytes.Reader }

func (mcpBody) Close() error { return nil }

// mcpBodyRead reports whether r's body was read whole already.
func mcpBodyRead(r *http.Request) bool {
	_, ok := r.Body.(mcpBody)
	return ok
}

// joinMCP admits an MCP request: a model token's. Only an initialize —
// a POST without Mcp-Session-Id whose body is that request — creates its
// session when it never existed (withSession reads the body to tell): any
// other request (a GET, a DELETE, a tools/call, a broken body, an unknown
// MCP session's id) would be refused by the MCP endpoint, and must leave
// nothing behind.
//
// A browser's request from a page of another site is refused first
// (crossOrigin: the WebSocket's rule).
func (srv *Server) joinMCP(w http.ResponseWriter, r *http.Request, pr Principal) (createMode, bool) {
	if !srv.sameOrListedOrigin(w, r) {
		return createNever, false
	}
	if !pr.Model {
		httpError(w, http.StatusForbidden, "forbidden", "the MCP endpoint takes a model token (side \"model\" in tokens.json), not "+withArticle(string(pr.Peer.Side))+" token: whoever can approve a session's calls must not be the one making them (docs/serve.md, Tokens)")
		return createNever, false
	}
	if r.Method != http.MethodPost {
		return createNever, true
	}
	return createIfInitialize, true
}

// isInitialize reports whether body is one JSON-RPC request of the method
// initialize (which no batch may hold), its member names exact.
func isInitialize(body []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	var method string
	return json.Unmarshal(m["method"], &method) == nil && method == "initialize"
}

// withArticle puts "a" or "an" before a side's name.
func withArticle(side string) string {
	if side != "" && strings.ContainsRune("aeiou", rune(side[0])) {
		return "an " + side
	}
	return "a " + side
}

func (srv *Server) handleWS(w http.ResponseWriter, r *http.Request, s *session.Session, pr Principal) {
	srv.serveWS(w, r, s, pr.Peer) // ws.go: the connection goes on after this returns
}

func (srv *Server) handleMCP(w http.ResponseWriter, r *http.Request, s *session.Session, pr Principal) {
	if srv.opts.MCP == nil { // here, not at the door: a node without one forwards to the session's owner (cluster.go)
		httpError(w, http.StatusNotFound, "not_found", "this kernel serves no MCP endpoint")
		return
	}
	// An MCP request in flight (a POST being answered, or the GET that
	// holds a session's event stream open) is an open connection of the
	// MCP side, counted beside the WebSocket ones.
	srv.conns.add(sideMCP, 1)
	defer srv.conns.add(sideMCP, -1)
	if r.Method == http.MethodPost {
		// Its body is read whole first, within bodyWithin: a body that
		// trickles held the request, its session and a stop's wait for as
		// long as its sender liked; read, it is a request being answered.
		if !mcpBodyRead(r) {
			if _, ok := readMCPBody(w, r); !ok {
				return
			}
		}
		// A stop waits for it to be answered (cluster_drain.go); once the
		// node stops, it is refused unserved, and a forwarding node sends
		// it to the session's next owner.
		done, ok := srv.opts.Manager.enterRequest()
		if !ok {
			notServed(w, "the node is stopping: connect again (in a cluster, another node takes its sessions)")
			return
		}
		defer done()
	}
	if end := connEnd(r.Context()); end != nil {
		// A request held open — the GET of the session's event stream, a
		// POST whose call waits — lives as long as a WebSocket does: it
		// ends when its token is revoked (withTokenEnd), and the call of a
		// POST ended so is cancelled (mcpbridge: the caller went away);
		// each request after is refused.
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		defer endWith(end, cancel)()
		r = r.WithContext(ctx)
	}
	// Who the caller is, as this kernel authenticated it: what an
	// elicitation-answered approval records as decider (mcpbridge.CallerHeader).
	// Never what the client sent.
	r.Header.Set(mcpCallerHeader, pr.Peer.Name)
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
