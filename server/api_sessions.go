package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brainrt/brain/internal/textcut"
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
	// SessionsPage returns up to limit ids of stored sessions after the
	// id after, in id order, and whether more follow.
	SessionsPage(ctx context.Context, after string, limit int) (ids []string, more bool, err error)
}

type sessionDeleter interface {
	Delete(ctx context.Context, id string) error
}

// The bounds of a page of [Manager.List] (GET /v1/sessions' limit).
const (
	DefaultListLimit = 1000
	MaxListLimit     = 1000
	// listScan bounds the sessions one page looks at, in pages' worth,
	// when keep refuses most of them (a tenant's few sessions among many
	// others'): the page comes back short, with its next cursor.
	listScan = 10
)

// List returns a page of the sessions, live or stored, in id order: up to
// limit of those whose id sorts after the id after ("" for the first
// page) and that keep accepts (nil: all), and the cursor of the next page
// ("" when this one is the last: pass it as after). A page may hold fewer
// than limit and still have a next one, when keep refused many. A store
// that cannot list its sessions contributes nothing; the error of one
// that fails is returned with the live sessions.
func (m *Manager) List(ctx context.Context, after string, limit int, keep func(id string) bool) (_ []SessionInfo, next string, err error) {
	limit = min(max(limit, 1), MaxListLimit)
	m.mu.Lock()
	type liveOne struct {
		e     *managed
		peers map[string]int
	}
	var lives []liveOne
	for id, e := range m.live {
		if id <= after {
			continue
		}
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
	slices.SortFunc(lives, func(a, b liveOne) int { return strings.Compare(a.e.id, b.e.id) })

	// The candidates, in order: the live sessions merged with the
	// stored ones, a store page at a time.
	sl, _ := m.opts.Store.(sessionLister)
	var stored []string
	storedMore := sl != nil && m.opts.Store != nil
	storedAfter := after
	nextStored := func() (string, bool) {
		if len(stored) == 0 && storedMore && err == nil {
			stored, storedMore, err = sl.SessionsPage(ctx, storedAfter, limit)
			if err != nil {
				stored, storedMore = nil, false
			}
			if len(stored) > 0 {
				storedAfter = stored[len(stored)-1]
			}
		}
		if len(stored) == 0 {
			return "", false
		}
		return stored[0], true
	}
	out := make([]SessionInfo, 0, min(limit, len(lives)+limit))
	last := ""
	for scanned := 0; ; scanned++ {
		sid, haveStored := nextStored()
		var info SessionInfo
		switch {
		case len(lives) > 0 && (!haveStored || lives[0].e.id <= sid):
			l := lives[0]
			lives = lives[1:]
			if haveStored && sid == l.e.id {
				stored = stored[1:] // live and stored: one row
			}
			info = m.liveInfo(l.e, l.peers)
		case haveStored:
			stored = stored[1:]
			info = SessionInfo{ID: sid, Peers: map[string]int{}}
		default:
			return out, "", err // no more
		}
		if len(out) == limit {
			return out, last, err // more follow: the page ends at the last one kept
		}
		if scanned == listScan*limit {
			return out, last, err // scanned enough: the page ends short
		}
		last = info.ID
		if keep == nil || keep(info.ID) {
			out = append(out, info)
		}
	}
}

// liveInfo is the list row of a live session.
func (m *Manager) liveInfo(e *managed, peers map[string]int) SessionInfo {
	snap := e.s.Snapshot()
	info := SessionInfo{ID: e.id, Live: true, Peers: peers, LastSeq: snap.Seq}
	for _, c := range snap.PendingCalls {
		if c.State == protocol.CallAwaitingApproval {
			info.PendingApprovals++
		} else {
			info.RunningCalls++
		}
	}
	if n := e.activity.Load(); n > 0 {
		info.LastActivity = time.Unix(0, n).UTC()
	}
	return info
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
	// Its journal closes before the store forgets it: what the session
	// does from here on (a turn that ends as it is cancelled, a timer)
	// is not stored, where the store would refuse it as a fault of its
	// own (a probe's delete during a turn made /readyz 503 for 30 s).
	m.journals.untrack(s)
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
// as the returned context lives, and holds the session as Acquire does
// until done is called: the connection outlives the request that opened
// it. Delete, a move (cluster.go) and a stop (shutdown.go) cancel it. The
// caller holds the session (Acquire or Lookup) while it connects, ends
// the connection with cancel, and calls done when it has ended.
func (m *Manager) connect(ctx context.Context, id string, side session.PeerSide, delivered *atomic.Uint64) (_ context.Context, cancel context.CancelCauseFunc, done func()) {
	ctx, cancel = context.WithCancelCause(ctx)
	c := &conn{side: side, cancel: cancel, delivered: delivered}
	m.mu.Lock()
	e := m.live[id]
	stopping := m.stopping.Load()
	if e != nil && !stopping {
		e.conns[c] = struct{}{}
		e.users++
	}
	m.mu.Unlock()
	switch {
	case stopping:
		e = nil
		cancel(ErrStopping) // the stop ended the connections already: this one ends too
	case e == nil:
		// The session left memory since the caller acquired it (deleted,
		// or its lease lost: cluster.go): nothing would end this
		// connection, so it ends now and the peer reconnects.
		cancel(nil)
	}
	return ctx, cancel, func() {
		cancel(nil)
		if e != nil {
			m.mu.Lock()
			delete(e.conns, c)
			m.mu.Unlock()
			m.release(e)
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

// unauthenticated answers a request without a valid token: 401, saying
// where the token goes (a probe's ?token= on an API request was told only
// of the header).
func unauthenticated(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="brain"`)
	msg := "a valid token is required (Authorization: Bearer <token>)"
	switch {
	case twoTokens(r):
		msg = "two different tokens (two Authorization headers, two ?token=, or a header and a ?token= that differ): send one"
	case r.URL.Query().Get("token") != "" && !(wsRoutes[r.Pattern] && isWebSocketHandshake(r)):
		msg += "; ?token= is taken by WebSocket connections only, where a browser cannot set the header"
	case r.Header.Get("Authorization") != "" && bearerToken(r) == "":
		msg += "; the Authorization header holds no Bearer token"
	}
	httpError(w, http.StatusUnauthorized, "unauthorized", msg)
}

// authenticated wraps h with authentication; a principal the endpoint is
// not for is refused with 403 forbidden.
func (srv *Server) authenticated(for_ who, h func(w http.ResponseWriter, r *http.Request, pr Principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr, ok := srv.authenticate(r)
		if !ok {
			unauthenticated(w, r)
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
		h(w, srv.withTokenEnd(r), pr)
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

// sessionsPage is GET /v1/sessions' answer.
type sessionsPage struct {
	Sessions []SessionInfo `json:"sessions"`
	// Next is the cursor of the next page (?cursor=), absent on the last.
	Next string `json:"next,omitempty"`
}

// handleListSessions is GET /v1/sessions[?limit=N][&cursor=C]: a page of
// the sessions in id order, at most limit (default and most 1000), after
// the cursor a previous page gave as next.
func (srv *Server) handleListSessions(w http.ResponseWriter, r *http.Request, pr Principal) {
	q := r.URL.Query()
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			httpError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("limit %q: want a whole number from 1 to %d", v, MaxListLimit))
			return
		}
		limit = n
	}
	m := srv.opts.Manager
	var keep func(string) bool
	if !pr.Operator() { // a client lists its tenant's sessions
		keep = func(id string) bool { return m.reaches(r.Context(), pr, id) }
	}
	cursor, bound := q.Get("cursor"), pr.tenantKey()
	after, err := m.cursors.open(r.Context(), m.opts.Store, cursor, bound)
	if err == nil && keep != nil && after != "" && !strings.HasPrefix(cursor, sealedCursorPrefix) && !keep(after) {
		err = errCursor // a plain id of no session of the client's (list_cursor.go)
	}
	switch {
	case errors.Is(err, errCursor):
		httpError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("cursor %q: %v", textcut.Cut(cursor, 64), err))
		return
	case err != nil:
		srv.cursorFailed(w, err)
		return
	}
	list, next, err := m.List(r.Context(), after, limit, keep)
	if err != nil {
		srv.log.Warn("list stored sessions", slog.String("error", err.Error()))
	}
	if keep != nil && next != "" {
		// A client's next page starts where this one's scan stopped,
		// which may be at another tenant's session: its position, sealed
		// (list_cursor.go). Sealed too when it is the page's last row, so
		// that the cursor still opens once that session is deleted (a
		// client deleting what it lists).
		if next, err = m.cursors.seal(r.Context(), m.opts.Store, next, bound); err != nil {
			srv.cursorFailed(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, sessionsPage{Sessions: list, Next: next})
}

// cursorFailed answers a list whose cursor could not be sealed or opened
// for want of the store's secret.
func (srv *Server) cursorFailed(w http.ResponseWriter, err error) {
	srv.log.Warn("list sessions: the cursors' key", slog.String("error", err.Error()))
	if msg, ok := storeFaultOf(err); ok {
		storeUnavailable(w, msg)
		return
	}
	httpError(w, http.StatusInternalServerError, "internal", "cannot seal the list's cursor: "+err.Error())
}

// handleCreateSession is POST /v1/sessions: an explicit create, the only
// way to make a session of a deleted session's id.
func (srv *Server) handleCreateSession(w http.ResponseWriter, r *http.Request, pr Principal) {
	var body struct {
		ID string `json:"id"`
	}
	data, ok := readBody(w, r, 4096, "invalid_request", `the body is {"id": "<session id>"} or empty (a generated id), at most 4,096 bytes`)
	if !ok {
		return
	}
	var err error
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := decodeStrict(data, &body); err != nil {
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
	data, ok := readBody(w, r, protocol.MaxFrameBytes, string(protocol.CodeTooLarge), "a frame is at most 1 MiB")
	if !ok {
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

// reaches reports whether pr's tenant owns session id.
func (m *Manager) reaches(ctx context.Context, pr Principal, id string) bool {
	owner, ok, err := m.owners.of(ctx, id)
	return err == nil && ok && pr.reaches(owner)
}
