package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

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

// fence wraps j so that nothing is appended once e's lease is not valid:
// a node that could not renew stops writing before another can take the
// session (the store's expected-last-sequence check refuses the rest).
func (m *Manager) fence(e *managed, j session.Journal) session.Journal {
	if e.lease == nil {
		return j
	}
	return &fencedJournal{j: j, lease: e.lease, id: e.id}
}

// ErrLeaseLost reports a journal append refused because this node no
// longer holds the session's lease.
var ErrLeaseLost = errors.New("this node no longer owns the session")

type fencedJournal struct {
	j     session.Journal
	lease Lease
	id    string
}

func (f *fencedJournal) Append(e session.Event) error {
	if !f.lease.Valid() {
		return fmt.Errorf("session %s: event %d: %w", f.id, e.Seq, ErrLeaseLost)
	}
	return f.j.Append(e)
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
			c.cancel()
		}
		if !mine {
			return
		}
		m.journals.untrack(e.s)
		if m.opts.Release != nil {
			m.opts.Release(e.s)
		}
		m.log.Warn("session lease lost: no longer serving it", slog.String("session", e.id), slog.Int("connections", len(conns)))
	}()
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
// was such an error; when forwarding is impossible (no address, or the
// request was forwarded to this node already) it answers 503 unavailable,
// which a client retries.
func (srv *Server) forward(w http.ResponseWriter, r *http.Request, err error) bool {
	var no *NotOwnerError
	if !errors.As(err, &no) {
		return false
	}
	if no.Addr == "" || r.Header.Get(forwardedHeader) != "" {
		srv.log.Info("session owned elsewhere, not forwarding", slog.String("session", no.Session), slog.String("owner", no.Node))
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "unavailable", "the session is moving between nodes; retry")
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
		},
		FlushInterval: -1, // MCP streams and server-sent events pass through at once
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			srv.log.Warn("forward to the session's owner", slog.String("session", no.Session), slog.String("owner", no.Node), slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "1")
			httpError(w, http.StatusServiceUnavailable, "unavailable", "the session's owner cannot be reached; retry")
		},
	}
	rp.ServeHTTP(w, r)
	return true
}
