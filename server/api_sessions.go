package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// ErrNotFound is returned by [Manager.Lookup] and [Manager.Delete] for a
// session that does not exist, live or stored.
var ErrNotFound = errors.New("no such session")

// SessionInfo is one row of [Manager.List]: what the console's sessions
// list shows.
type SessionInfo struct {
	ID string `json:"id"`
	// Live is false for a session that is stored but hibernated: its other
	// fields are unknown (zero) until something wakes it.
	Live bool `json:"live"`
	// Peers counts the WebSocket connections by side ("client", "app",
	// "environment", "operator").
	Peers            map[string]int `json:"peers"`
	LastSeq          uint64         `json:"lastSeq"`
	PendingApprovals int            `json:"pendingApprovals"`
	RunningCalls     int            `json:"runningCalls"`
	// LastActivity is the time of the last call event, connection or
	// request; zero when unknown.
	LastActivity time.Time `json:"lastActivity,omitzero"`
}

// sessionLister and sessionDeleter are what a [Store] may offer beyond
// journaling (package store has both).
type sessionLister interface {
	Sessions(ctx context.Context) ([]string, error)
}

type sessionDeleter interface {
	Delete(ctx context.Context, id string) error
}

// List returns every session, live or stored, ordered by id. A store that
// cannot list its sessions contributes nothing; the error of one that
// fails is returned with the live sessions.
func (m *Manager) List(ctx context.Context) ([]SessionInfo, error) {
	m.mu.Lock()
	type liveOne struct {
		e     *managed
		peers map[string]int
	}
	var lives []liveOne
	for _, e := range m.live {
		select {
		case <-e.ready:
		default:
			continue // opening
		}
		if e.err != nil {
			continue
		}
		peers := map[string]int{}
		for c := range e.conns {
			peers[string(c.side)]++
		}
		lives = append(lives, liveOne{e, peers})
	}
	m.mu.Unlock()
	out := make([]SessionInfo, 0, len(lives))
	seen := map[string]bool{}
	for _, l := range lives {
		snap := l.e.s.Snapshot()
		info := SessionInfo{ID: l.e.id, Live: true, Peers: l.peers, LastSeq: snap.Seq}
		for _, c := range snap.PendingCalls {
			if c.State == protocol.CallAwaitingApproval {
				info.PendingApprovals++
			} else {
				info.RunningCalls++
			}
		}
		if n := l.e.activity.Load(); n > 0 {
			info.LastActivity = time.Unix(0, n).UTC()
		}
		seen[info.ID] = true
		out = append(out, info)
	}
	var err error
	if sl, ok := m.opts.Store.(sessionLister); ok && m.opts.Store != nil {
		var ids []string
		if ids, err = sl.Sessions(ctx); err == nil {
			for _, id := range ids {
				if !seen[id] {
					out = append(out, SessionInfo{ID: id, Peers: map[string]int{}})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

// Delete ends every pending call of the session with cancelled, cancels
// its running turn (the model loop stops: it makes no call on a session
// nobody can reach), closes its connections, drops it from memory and
// deletes it from the store. It
// returns how many calls it cancelled; a session that does not exist is
// [ErrNotFound].
func (m *Manager) Delete(ctx context.Context, id string) (cancelled int, err error) {
	s, release, err := m.Lookup(ctx, id)
	if err != nil {
		return 0, err
	}
	for _, c := range s.Snapshot().PendingCalls {
		if s.Cancel(c.CallID, "the session was deleted") == nil {
			cancelled++
		}
	}
	_ = s.CancelTurn("the session was deleted") // conflict: no turn running
	m.mu.Lock()
	e := m.live[id]
	if e != nil && e.s == s {
		delete(m.live, id)
	} else {
		e = nil
	}
	var conns []*conn
	if e != nil {
		for c := range e.conns {
			conns = append(conns, c)
		}
	}
	m.mu.Unlock()
	// Every connection is shown the calls' cancellations before it closes
	// (bounded: a peer that does not read is cut anyway), then closes with
	// a reason a client does not reconnect on.
	last := s.LastSeq()
	deadline := time.Now().Add(time.Second)
	for _, c := range conns {
		for c.delivered != nil && c.delivered.Load() < last && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // polling a counter, for at most a second
		}
		c.cancel(ErrDeleted)
	}
	release()
	m.dropLease(e) // cluster.go
	if e != nil && m.opts.Release != nil {
		m.opts.Release(s)
	}
	if d, ok := m.opts.Store.(sessionDeleter); ok && m.opts.Store != nil {
		if err := d.Delete(ctx, id); err != nil {
			return cancelled, err
		}
	}
	// A tombstone: its tenant's quota is given back, and nothing but an
	// explicit create makes a session of this id again (tenancy.go).
	if err := m.owners.deleted(ctx, id); err != nil {
		return cancelled, err
	}
	m.log.Info("session deleted", slog.String("session", id), slog.Int("cancelled", cancelled))
	return cancelled, nil
}

// connect records a connection of side to the live session id for as long
// as the returned context lives; Delete cancels it. The caller holds the
// session (Acquire or Lookup) and calls done when the connection ends.
func (m *Manager) connect(ctx context.Context, id string, side session.PeerSide, delivered *atomic.Uint64) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &conn{side: side, cancel: cancel, delivered: delivered}
	m.mu.Lock()
	e := m.live[id]
	if e != nil {
		e.conns[c] = struct{}{}
	}
	m.mu.Unlock()
	if e == nil {
		// The session left memory since the caller acquired it (deleted,
		// or its lease lost: cluster.go): nothing would end this
		// connection, so it ends now and the peer reconnects.
		cancel(nil)
	}
	return ctx, func() {
		cancel(nil)
		if e != nil {
			m.mu.Lock()
			delete(e.conns, c)
			m.mu.Unlock()
			e.touch()
		}
	}
}

// authenticate decides who a request is: the operator signed in to the
// console (set by [Console] on its own listener), or the bearer token
// ("Authorization: Bearer <token>", or ?token= on a WebSocket handshake).
func (srv *Server) authenticate(r *http.Request) (Principal, bool) {
	if p, ok := r.Context().Value(consolePeerKey{}).(session.Peer); ok {
		return Principal{Peer: p}, true
	}
	return srv.opts.Tokens.Identify(bearerToken(r)) // ?token= on WebSocket handshakes only (auth.go)
}

// who says which sides may use an endpoint.
type who int

const (
	operatorsOnly who = iota // operators
	peers                    // operators, clients, apps, environments: not the model side
	clients                  // operators and clients
)

// authenticated wraps h with authentication; a principal the endpoint is
// not for is refused with 403 forbidden.
func (srv *Server) authenticated(for_ who, h func(w http.ResponseWriter, r *http.Request, pr Principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr, ok := srv.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="brain"`)
			httpError(w, http.StatusUnauthorized, "unauthorized", "a valid token is required (Authorization: Bearer <token>)")
			return
		}
		side := pr.Peer.Side
		switch {
		case side == session.SideOperator:
		case for_ == operatorsOnly:
			httpError(w, http.StatusForbidden, "forbidden", "this endpoint needs an operator token, not a "+string(side)+" token")
			return
		case pr.Model:
			httpError(w, http.StatusForbidden, "forbidden", modelOnlyMCP)
			return
		case for_ == clients && side != session.SideClient:
			httpError(w, http.StatusForbidden, "forbidden", "this endpoint is for client and operator tokens, not a "+string(side)+" token")
			return
		}
		h(w, r, pr)
	}
}

// modelOnlyMCP is what the model side is told anywhere but MCP.
const modelOnlyMCP = "a model token reaches only a session's MCP endpoint (/v1/sessions/{id}/mcp): it lists and invokes the llm audience, and never decides, registers, answers calls or reads events"

// openSession acquires session id for principal pr, or writes the error
// and returns ok false. An operator never creates a session: it looks one
// up. A session pr's tenant does not own is 404 not_found, as if it did
// not exist.
func (srv *Server) openSession(w http.ResponseWriter, r *http.Request, id string, pr Principal, create bool) (*session.Session, func(), bool) {
	if !ValidSessionID(id) {
		httpError(w, http.StatusBadRequest, "invalid_request", "invalid session id: use 1 to 128 of A-Z a-z 0-9 _ -")
		return nil, nil, false
	}
	s, release, err := srv.opts.Manager.AcquireAs(r.Context(), pr, id, create)
	if !srv.acquireFailed(w, r, id, err) {
		return nil, nil, false
	}
	return s, release, true
}

// acquireFailed writes the HTTP error of a failed acquire (or forwards
// the request to the session's owner node) and returns false; it returns
// true when err is nil.
func (srv *Server) acquireFailed(w http.ResponseWriter, r *http.Request, id string, err error) bool {
	var perr *protocol.Error
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrNotFound):
		httpError(w, http.StatusNotFound, "not_found", "no session "+id)
	case errors.Is(err, ErrStopping):
		notServed(w, "the node is stopping: connect again (in a cluster, another node takes its sessions)") // cluster_retry.go
	case errors.Is(err, ErrDeleted):
		httpError(w, http.StatusNotFound, "not_found", "session "+id+" was deleted; a new session of this id starts only by POST /v1/sessions")
	case errors.As(err, &perr) && perr.Code == protocol.CodeQuotaExceeded:
		httpError(w, http.StatusTooManyRequests, string(perr.Code), perr.Message)
	case srv.forward(w, r, err): // owned by another node (cluster.go)
	default:
		if msg, ok := storeFaultOf(err); ok { // storefault.go
			srv.log.Warn("acquire session: the store cannot serve", slog.String("session", id), slog.String("error", err.Error()))
			w.Header().Set(notServedHeader, "1")
			storeUnavailable(w, msg)
			return false
		}
		srv.log.Error("acquire session", slog.String("session", id), slog.String("error", err.Error()))
		httpError(w, http.StatusServiceUnavailable, "unavailable", "the session cannot be opened")
	}
	return false
}

// sessionRead is GET /v1/sessions/{id}: the session's snapshot (filtered
// for the peer) with its list row.
type sessionRead struct {
	SessionInfo
	Capabilities []protocol.Capability  `json:"capabilities"`
	PendingCalls []protocol.PendingCall `json:"pendingCalls"`
	Seq          uint64                 `json:"seq"`
}

func (srv *Server) handleListSessions(w http.ResponseWriter, r *http.Request, pr Principal) {
	list, err := srv.opts.Manager.List(r.Context())
	if err != nil {
		srv.log.Warn("list stored sessions", slog.String("error", err.Error()))
	}
	if !pr.Operator() { // a client lists its tenant's sessions
		list = srv.opts.Manager.reachable(r.Context(), pr, list)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
}

// handleCreateSession is POST /v1/sessions: an explicit create, the only
// way to make a session of a deleted session's id.
func (srv *Server) handleCreateSession(w http.ResponseWriter, r *http.Request, pr Principal) {
	var body struct {
		ID string `json:"id"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err != nil {
		httpError(w, http.StatusBadRequest, "invalid_request", "cannot read the body")
		return
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			httpError(w, http.StatusBadRequest, "invalid_request", `the body is {"id": "<session id>"} or empty (a generated id): `+err.Error())
			return
		}
	}
	if body.ID == "" {
		if body.ID, err = newSessionID(); err != nil {
			httpError(w, http.StatusInternalServerError, "internal", "cannot generate a session id")
			return
		}
	}
	if !ValidSessionID(body.ID) {
		httpError(w, http.StatusBadRequest, "invalid_request", "invalid session id: use 1 to 128 of A-Z a-z 0-9 _ -")
		return
	}
	s, release, err := srv.opts.Manager.Create(r.Context(), pr, body.ID)
	if errors.Is(err, ErrExists) {
		httpError(w, http.StatusConflict, string(protocol.CodeConflict), "a session "+body.ID+" exists")
		return
	}
	if !srv.acquireFailed(w, r, body.ID, err) {
		return
	}
	defer release()
	writeJSON(w, http.StatusCreated, srv.opts.Manager.info(body.ID, s.Snapshot()))
}

func (srv *Server) handleReadSession(w http.ResponseWriter, r *http.Request, pr Principal) {
	id := r.PathValue("id")
	p := pr.Peer
	s, release, ok := srv.openSession(w, r, id, pr, false)
	if !ok {
		return
	}
	defer release()
	snap := filterSnapshot(s, p, s.Snapshot())
	out := sessionRead{Capabilities: snap.Capabilities, PendingCalls: snap.PendingCalls, Seq: snap.Seq}
	out.SessionInfo = srv.opts.Manager.info(id, snap)
	writeJSON(w, http.StatusOK, out)
}

// info is the list row of a live session, given its snapshot.
func (m *Manager) info(id string, snap *protocol.Snapshot) SessionInfo {
	info := SessionInfo{ID: id, Live: true, Peers: map[string]int{}, LastSeq: snap.Seq}
	m.mu.Lock()
	if e := m.live[id]; e != nil {
		for c := range e.conns {
			info.Peers[string(c.side)]++
		}
		if n := e.activity.Load(); n > 0 {
			info.LastActivity = time.Unix(0, n).UTC()
		}
	}
	m.mu.Unlock()
	for _, c := range snap.PendingCalls {
		if c.State == protocol.CallAwaitingApproval {
			info.PendingApprovals++
		} else {
			info.RunningCalls++
		}
	}
	return info
}

func (srv *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request, pr Principal) {
	id := r.PathValue("id")
	if !ValidSessionID(id) {
		httpError(w, http.StatusBadRequest, "invalid_request", "invalid session id: use 1 to 128 of A-Z a-z 0-9 _ -")
		return
	}
	if !pr.Operator() { // a client deletes its tenant's sessions only
		owner, ok, err := srv.opts.Manager.owners.of(r.Context(), id)
		if err != nil || !ok || !pr.reaches(owner) {
			httpError(w, http.StatusNotFound, "not_found", "no session "+id)
			return
		}
	}
	n, err := srv.opts.Manager.Delete(r.Context(), id)
	switch {
	case errors.Is(err, ErrNotFound):
		httpError(w, http.StatusNotFound, "not_found", "no session "+id)
		return
	case err != nil:
		srv.log.Error("delete session", slog.String("session", id), slog.String("error", err.Error()))
		httpError(w, http.StatusServiceUnavailable, "unavailable", "the session could not be deleted from the store")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": id, "cancelledCalls": n})
}

// frameCommands are the commands POST /v1/sessions/{id}/frames accepts:
// the ones that need no connection to answer later.
var frameCommands = map[protocol.Type]bool{
	protocol.TypeCapabilityApprove: true,
	protocol.TypeCapabilityInvoke:  true,
	protocol.TypeCapabilityCancel:  true,
}

// handleFrame is POST /v1/sessions/{id}/frames: one command frame over
// plain HTTP, answered with its reply frame (ack or error). It never
// creates a session.
func (srv *Server) handleFrame(w http.ResponseWriter, r *http.Request, pr Principal) {
	id := r.PathValue("id")
	p := pr.Peer
	data, err := io.ReadAll(io.LimitReader(r.Body, protocol.MaxFrameBytes+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, "invalid_request", "cannot read the body")
		return
	}
	if len(data) > protocol.MaxFrameBytes {
		httpError(w, http.StatusRequestEntityTooLarge, string(protocol.CodeTooLarge), "a frame is at most 1 MiB")
		return
	}
	f, err := protocol.DecodePeerFrame(data) // refuses the kernel's seq and ref
	if err != nil {
		httpError(w, http.StatusBadRequest, string(protocol.CodeInvalidRequest), err.Error())
		return
	}
	if !frameCommands[f.Msg.MessageType()] {
		httpError(w, http.StatusBadRequest, string(protocol.CodeInvalidRequest),
			string(f.Msg.MessageType())+" needs a WebSocket connection: this endpoint takes capability_approve, capability_invoke and capability_cancel")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(data)) // read again if the request is forwarded to the session's owner (cluster.go)
	s, release, ok := srv.openSession(w, r, id, pr, false)
	if !ok {
		return
	}
	defer release()
	var reply *protocol.Frame
	if perr := srv.opts.Manager.Admit(s); perr != nil && f.Msg.MessageType() == protocol.TypeCapabilityInvoke { // quotas (limits.go)
		reply = &protocol.Frame{Seq: s.LastSeq(), Ref: f.ID, Msg: &protocol.ErrorReply{Code: perr.Code, Message: perr.Message}}
	} else {
		reply = s.HandleFrame(p, f)
	}
	b, err := protocol.EncodeFrame(reply)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "internal", "cannot encode the reply")
		return
	}
	status := http.StatusOK
	if e, ok := reply.Msg.(*protocol.ErrorReply); ok {
		status = statusOf(e.Code)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// statusOf maps an error reply's code to an HTTP status.
func statusOf(c protocol.Code) int {
	switch c {
	case protocol.CodeNotFound:
		return http.StatusNotFound
	case protocol.CodeForbidden:
		return http.StatusForbidden
	case protocol.CodeConflict:
		return http.StatusConflict
	case protocol.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case protocol.CodeQuotaExceeded:
		return http.StatusTooManyRequests
	}
	return http.StatusBadRequest
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// routeSessionsAPI adds the sessions and approvals API:
//
//	GET    /v1/sessions                list (operator)
//	GET    /v1/sessions/{id}           read: snapshot and list row; 404 not_found, creates nothing
//	DELETE /v1/sessions/{id}           delete (operator): pending calls end cancelled first
//	POST   /v1/sessions/{id}/frames    one command frame over HTTP (approve, invoke, cancel)
//	GET    /v1/sessions/{id}/calls/{c} the kernel's timings of a recent call (operator)
//	GET    /v1/approvals               pending approvals across sessions (operator)
//	GET    /v1/approvals/ws            the same as a live stream (operator)
func (srv *Server) routeSessionsAPI() {
	srv.mux.HandleFunc("GET /v1/sessions", srv.authenticated(clients, srv.handleListSessions))
	srv.mux.HandleFunc("POST /v1/sessions", srv.authenticated(clients, srv.handleCreateSession))
	srv.mux.HandleFunc("GET /v1/sessions/{id}", srv.authenticated(peers, srv.handleReadSession))
	srv.mux.HandleFunc("DELETE /v1/sessions/{id}", srv.authenticated(clients, srv.handleDeleteSession))
	srv.mux.HandleFunc("POST /v1/sessions/{id}/frames", srv.authenticated(peers, srv.handleFrame))
	srv.mux.HandleFunc("GET /v1/sessions/{id}/calls/{call}", srv.authenticated(operatorsOnly, srv.handleCallTimes))
	srv.mux.HandleFunc("GET /v1/approvals", srv.authenticated(operatorsOnly, srv.handleApprovals))
	srv.mux.HandleFunc("GET /v1/approvals/ws", srv.authenticated(operatorsOnly, srv.handleApprovalsWS))
}

// newSessionID is the id of a session created without one: 128 random
// bits, so that nobody guesses another tenant's.
func newSessionID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "s" + hex.EncodeToString(b[:]), nil
}

// reachable keeps the rows of list that pr's tenant owns.
func (m *Manager) reachable(ctx context.Context, pr Principal, list []SessionInfo) []SessionInfo {
	out := list[:0]
	for _, info := range list {
		if owner, ok, err := m.owners.of(ctx, info.ID); err == nil && ok && pr.reaches(owner) {
			out = append(out, info)
		}
	}
	return out
}
