package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Lease is this node's hold on one session in a cluster (package store's
// *Lease implements it): while it is valid this node alone serves and
// journals the session.
type Lease interface {
	// Lost is closed once the lease is lost or released.
	Lost() <-chan struct{}
	// Valid reports whether the lease is still held and within its
	// renewed validity.
	Valid() bool
	// Release gives the lease up so another node may take the session.
	Release(ctx context.Context) error
}

// LeaseFunc acquires the lease of session id for this node. When another
// node holds it, the error has a method LeaseHolder() (node, addr string)
// (package store's *LeasedError) naming where to forward.
type LeaseFunc func(ctx context.Context, id string) (Lease, error)

// HolderFunc names the node holding session id's lease, without taking
// it; held is false when no node holds it (package store's
// Leases.Holder).
type HolderFunc func(ctx context.Context, id string) (node string, held bool, err error)

// forwardedHeader marks a request forwarded by another node (its value is
// that node's id): a node forwards a request at most once.
const forwardedHeader = "Brain-Forwarded-By"

// NotOwnerError reports a session owned by another node of the cluster.
type NotOwnerError struct {
	Session string
	Node    string // the owner's node id
	Addr    string // the owner's advertised address; empty if it has none
	Err     error
}

func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("session %s is owned by node %q: %v", e.Session, e.Node, e.Err)
}

func (e *NotOwnerError) Unwrap() error { return e.Err }

// takeLease acquires e's lease when the manager is clustered; the caller
// releases it (dropLease) if the session cannot be opened.
func (m *Manager) takeLease(ctx context.Context, e *managed) error {
	if m.opts.Lease == nil {
		return nil
	}
	l, err := m.opts.Lease(ctx, e.id)
	if err != nil {
		var h interface{ LeaseHolder() (string, string) }
		if errors.As(err, &h) {
			node, addr := h.LeaseHolder()
			return &NotOwnerError{Session: e.id, Node: node, Addr: addr, Err: err}
		}
		return fmt.Errorf("session %s: lease: %w", e.id, err)
	}
	e.lease = l
	return nil
}

// fence wraps j so that nothing is appended once e's lease is not valid
// (a node that could not renew stops writing before another can take the
// session; the store's expected-last-sequence check refuses the rest),
// and so that the session's connections never show an event the journal
// has not stored: the first append that fails or is refused hands the
// session over (handOver), and nothing after it is ever written to a peer
// (see [fencedJournal]).
func (m *Manager) fence(e *managed, j session.Journal) session.Journal {
	if e.lease == nil {
		return j
	}
	if h, ok := j.(interface{ HoldWhile(func() bool) }); ok {
		// An append rides out a stream between leaders (an election) for
		// as long as the lease is valid, instead of handing the session
		// over after the store's timeout: the lease rides the same
		// election out (package store), and the store's expected last
		// sequence keeps a stale append out whatever the lease says.
		h.HoldWhile(e.lease.Valid)
	}
	return &fencedJournal{j: j, lease: e.lease, id: e.id, onFail: func(err error) { m.handOver(e, err) },
		failedCh: make(chan struct{}), started: map[string]chan struct{}{}}
}

// ErrLeaseLost reports a journal append refused because this node no
// longer holds the session's lease, or stopped serving the session after
// an append failed.
var ErrLeaseLost = errors.New("this node no longer owns the session")

// fencedJournal is a clustered session's journal. It tracks the last seq
// the store acknowledged (durable): a connection writes a peer only
// events and replies up to it (ws.go), so a peer never sees an event that
// a node taking the session over would not restore — its ?after= seq is
// always one the journal holds, and the new owner's next event follows it.
//
// An append that fails (the store cannot be reached in time, fencing
// refused it) or is refused here (the lease is not valid) marks the
// journal failed: every later append is refused, durable never moves
// again, and the session is handed over — its lease released, its
// connections closed — to be restored from what the journal holds, on
// this node or another. The session's in-memory events after durable are
// thrown away with it.
//
// A user invocation's ack names a call: it waits until the call's first
// event is stored (admits), so that a peer never holds the id of a call a
// new owner would not know. session.Start returns only once that event is
// in the journal, on every node kind, so the wait is a guard that finds
// it stored.
type fencedJournal struct {
	j        session.Journal
	lease    Lease
	id       string
	onFail   func(error) // called once, in its own goroutine
	durable  atomic.Uint64
	failed   atomic.Bool
	once     sync.Once
	failedCh chan struct{} // closed once failed
	failErr  error         // the failure; set before failedCh closes

	mu      sync.Mutex
	started map[string]chan struct{} // call id → closed once an event of the call is stored
	order   []string                 // started's keys, a ring of startedMemory
	next    int                      // order's oldest entry once it is full
}

// startedMemory bounds the calls a fenced journal remembers as started:
// an ack is checked right after its call starts, so a few are enough.
const startedMemory = 1024

// ackWait bounds how long an ack waits for its call's first event to be
// stored. It outlasts the longest append: one that rides out an election
// while the lease is valid (package store's HoldWhile: at most 30 s, and
// its last attempt's second). It was 10 s, shorter than such an append,
// and a loaded run of TestServeClusterFaults closed a connection whose
// call was being stored through the election of a killed server (1012
// after exactly 10 s, nothing failed): an ack ends with its event stored,
// or with the journal failed (failedCh), not before.
const ackWait = 35 * time.Second

func (f *fencedJournal) Append(e session.Event) error {
	if f.failed.Load() {
		return fmt.Errorf("session %s: event %d: an earlier append failed, the session is being handed over: %w", f.id, e.Seq, ErrLeaseLost)
	}
	var err error
	if !f.lease.Valid() {
		err = fmt.Errorf("session %s: event %d: %w", f.id, e.Seq, ErrLeaseLost)
	} else if err = f.j.Append(e); err == nil {
		f.durable.Store(e.Seq)
		if id := protocol.CallIDOf(e.Msg); id != "" {
			f.stored(id)
		}
		return nil
	} else if tl := (*session.EventTooLargeError)(nil); errors.As(err, &tl) {
		return err // refused before anything was stored: the journal is as it was
	}
	f.failed.Store(true)
	f.once.Do(func() { f.failErr = err; close(f.failedCh); go f.onFail(err) })
	return err
}

// closeCause is what ends a connection that must not be shown more of
// the session: the journal failed (why, storefault.go), or an ack waited
// too long for its call's first event.
func (f *fencedJournal) closeCause() *closeError { return leaveCause(f.failure()) }

// failure returns why the journal failed, or nil.
func (f *fencedJournal) failure() error {
	select {
	case <-f.failedCh:
		return f.failErr
	default:
		return nil
	}
}

// entry returns call id's channel, creating it open; f.mu is held.
func (f *fencedJournal) entry(id string) chan struct{} {
	ch := f.started[id]
	if ch == nil {
		ch = make(chan struct{})
		f.started[id] = ch
		if len(f.order) < startedMemory {
			f.order = append(f.order, id)
		} else {
			delete(f.started, f.order[f.next])
			f.order[f.next] = id
			f.next = (f.next + 1) % startedMemory
		}
	}
	return ch
}

// stored records that an event of call id is stored.
func (f *fencedJournal) stored(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.entry(id)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// admits reports whether reply f may be sent to a peer: no append has
// failed and, for the ack of a user invocation, its call's first event is
// stored (waiting for it, at most ackWait).
func (f *fencedJournal) admits(r *protocol.Frame) bool {
	if a, ok := r.Msg.(*protocol.Ack); ok && a.CallID != "" {
		f.mu.Lock()
		ch := f.entry(a.CallID)
		f.mu.Unlock()
		t := time.NewTimer(ackWait)
		defer t.Stop()
		select {
		case <-ch:
		case <-f.failedCh:
			return false
		case <-t.C:
			return false
		}
	}
	return !f.failed.Load()
}

// shows reports whether a peer may be shown the session up to seq: the
// journal has stored it.
func (f *fencedJournal) shows(seq uint64) bool { return seq <= f.durable.Load() }

// restoredUpTo tells a clustered session's journal j the last event the
// store held when the session was loaded (seq last): peers may be shown
// the events up to it.
func restoredUpTo(j session.Journal, last uint64) {
	if f, ok := j.(*fencedJournal); ok && last > 0 {
		f.durable.Store(last)
	}
}

// journalGate is what a connection asks before it shows a peer an event
// or a reply (ws.go): whether the journal holds the session up to a seq.
// A clustered session's is its fencedJournal; a session on a node of its
// own, with a store, its countingJournal (limits.go, failedAt).
type journalGate interface {
	shows(seq uint64) bool
	admits(r *protocol.Frame) bool
	closeCause() *closeError
}

// gateOf returns session s's journalGate, or nil for a session without a
// store.
func (m *Manager) gateOf(s *session.Session) journalGate {
	m.journals.mu.Lock()
	cj := m.journals.by[s]
	m.journals.mu.Unlock()
	switch {
	case cj == nil:
		return nil
	case cj.onFail != nil:
		return cj
	}
	if f, ok := cj.j.(*fencedJournal); ok {
		return f
	}
	return nil
}

// fenceOf returns session s's fenced journal, or nil when s is not a
// clustered session of this manager.
func (m *Manager) fenceOf(s *session.Session) *fencedJournal {
	m.journals.mu.Lock()
	cj := m.journals.by[s]
	m.journals.mu.Unlock()
	if cj == nil {
		return nil
	}
	f, _ := cj.j.(*fencedJournal)
	return f
}

// moving reports a session this node is giving up — its journal failed,
// or its lease is no longer valid — but has not yet dropped from memory:
// a [*NotOwnerError] without an address, which the server answers with
// 503 and a client retries, rather than a connection to a session whose
// events it may not be shown.
func (m *Manager) moving(e *managed) error {
	if e.lease == nil {
		return nil
	}
	if f := m.fenceOf(e.s); (f != nil && f.failed.Load()) || !e.lease.Valid() {
		return &NotOwnerError{Session: e.id, Node: m.opts.Node, Err: ErrLeaseLost}
	}
	return nil
}

// handOver gives up e's session after its journal failed: releasing the
// lease closes Lost, so watchLease drops the session and closes its
// connections, and another node (or this one, on the next connection)
// restores it from the journal.
func (m *Manager) handOver(e *managed, err error) {
	m.log.Warn("session journal append failed: handing the session over", slog.String("session", e.id), slog.String("error", err.Error()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rerr := e.lease.Release(ctx); rerr != nil {
		m.log.Warn("release session lease", slog.String("session", e.id), slog.String("error", rerr.Error()))
	}
}

// Bytes passes the store journal's count through (limits.go).
func (f *fencedJournal) Bytes() int64 {
	if s, ok := f.j.(sizedJournal); ok {
		return s.Bytes()
	}
	return 0
}

// watchLease stops serving e's session once its lease is lost: the
// session leaves memory and its connections close (peers reconnect, to
// whichever node then owns it). Released leases (hibernation, deletion)
// end here too; the session has then left already.
func (m *Manager) watchLease(e *managed) {
	if e.lease == nil {
		return
	}
	go func() {
		<-e.lease.Lost()
		// Why: the journal's failure when it handed the session over, or
		// the lease's own (lapsed, taken).
		var why error
		if f := m.fenceOf(e.s); f != nil {
			why = f.failure()
		}
		if le, ok := e.lease.(interface{ Err() error }); ok && why == nil {
			why = le.Err()
		}
		m.leave(e, why, leaveCause(why), "session lease lost: no longer serving it")
	}()
}

// leave stops serving e's session, for why (nil: its lease was released
// or lapsed): it leaves memory, and its connections close with cause (a
// code and a reason, never a bare drop: storefault.go), so that peers
// reconnect — to this node, which restores the session from its journal,
// or in a cluster to its next owner. Released sessions (hibernation,
// deletion) have left already: their connections are closed, nothing else
// is done.
func (m *Manager) leave(e *managed, why error, cause *closeError, what string) {
	m.mu.Lock()
	mine := m.live[e.id] == e
	if mine {
		delete(m.live, e.id)
	}
	conns := make([]*conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.cancel(cause)
	}
	if !mine {
		return
	}
	m.journals.untrack(e.s)
	if m.opts.Release != nil {
		m.opts.Release(e.s)
	}
	attrs := []any{slog.String("session", e.id), slog.Int("connections", len(conns))}
	if why != nil {
		attrs = append(attrs, slog.String("error", why.Error()))
	}
	m.log.Warn(what, attrs...)
}

// dropLease releases e's lease, if it has one.
func (m *Manager) dropLease(e *managed) {
	if e == nil || e.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.lease.Release(ctx); err != nil {
		m.log.Warn("release session lease", slog.String("session", e.id), slog.String("error", err.Error()))
	}
}

// forward serves a request for a session owned by another node (err is a
// [*NotOwnerError]) by proxying it — WebSocket upgrades, MCP streams and
// plain requests alike — to the owner's advertised address, headers,
// token and query (resume by ?after=) unchanged. It reports whether err
// was such an error. When forwarding is impossible (no address: the
// session is moving; or the request was forwarded to this node already)
// or the owner did not serve the request, a client's request is sent
// again within a bound (cluster_retry.go) and otherwise answered 503
// unavailable, which a client retries.
func (srv *Server) forward(w http.ResponseWriter, r *http.Request, err error) bool {
	var no *NotOwnerError
	if !errors.As(err, &no) {
		return false
	}
	st := replayOf(r)
	st.readBody(r) // kept for another try, whatever this one does
	if no.Addr == "" || r.Header.Get(forwardedHeader) != "" {
		if st.retry() {
			return true
		}
		srv.log.Info("session owned elsewhere, not forwarding", slog.String("session", no.Session), slog.String("owner", no.Node))
		notServed(w, "the session is moving between nodes; retry")
		return true
	}
	target, perr := url.Parse(no.Addr)
	if perr != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		srv.log.Error("owner's address is not an http URL", slog.String("owner", no.Node), slog.String("addr", no.Addr))
		httpError(w, http.StatusServiceUnavailable, "unavailable", "the session's owner has no usable address")
		return true
	}
	node := srv.opts.Manager.opts.Node
	if node == "" {
		node = "?"
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath = r.URL.Path, r.URL.RawPath
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, node)
			pr.Out.Header.Set(forwardedHostHeader, clientHost(r)) // what a browser's Origin is checked against (origin.go)
			if st != nil && st.buffered && len(st.body) > 0 {
				// The transport may send it again itself on a kept-alive
				// connection that turns out closed before anything was
				// written.
				body := st.body
				pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(notServedHeader) != "" && st != nil && st.buffered && !st.final {
				_ = resp.Body.Close()
				return errNotServed
			}
			return nil
		},
		FlushInterval: -1, // MCP streams and server-sent events pass through at once
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, pr *http.Request, err error) {
			unserved := errors.Is(err, errNotServed) || notDelivered(err) || idempotent(pr)
			if !unserved && st.canRetry() && pr.Context().Err() == nil {
				unserved = srv.ownerStopped(pr.Context(), no) // dropped by a stopping owner?
			}
			if unserved && pr.Context().Err() == nil && st.retry() {
				srv.log.Debug("forward to the session's owner: sending it again", slog.String("session", no.Session), slog.String("owner", no.Node), slog.String("error", err.Error()))
				return
			}
			srv.log.Log(pr.Context(), srv.forwardLevel(no.Node), "forward to the session's owner", slog.String("session", no.Session), slog.String("owner", no.Node), slog.String("error", err.Error()))
			if unserved {
				notServed(w, "the session's owner cannot be reached; retry")
				return
			}
			// The owner had the request and went away before answering,
			// keeping the lease: it may have been served (a tools/call may
			// have run), so it is not sent again, and the caller is told
			// where its outcome is.
			w.Header().Set("Retry-After", "1")
			httpError(w, http.StatusServiceUnavailable, "unavailable",
				"the session's owner went away before answering; the request may have been served (a call's outcome is in the session's log)")
		},
	}
	rp.ServeHTTP(w, r)
	return true
}

// forwardLevel is the level of a failed forward to owner's log line: warn
// at most once in forwardWarnEvery for each owner, debug between. While
// an owner that died keeps its lease (up to its TTL, 20 s), every client's
// retry failed and was a warn line — two a second a client (a lifecycle
// probe) — all saying the one thing.
func (srv *Server) forwardLevel(owner string) slog.Level {
	now := time.Now()
	if last, ok := srv.forwardWarned.Load(owner); ok && now.Sub(last.(time.Time)) < forwardWarnEvery {
		return slog.LevelDebug
	}
	srv.forwardWarned.Store(owner, now)
	return slog.LevelWarn
}

// forwardWarnEvery bounds how often one owner's failed forwards warn.
const forwardWarnEvery = 10 * time.Second
