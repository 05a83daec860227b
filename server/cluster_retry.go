package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Forwarding rides a handover out.
//
// Why: a request for a session owned by another node is proxied to the
// owner (forward, cluster.go). When the owner stops (SIGTERM), it first
// refuses new requests ("the node is stopping"), then closes its listener,
// and only then releases its leases; when it dies, its leases stay held
// until they lapse. A forwarded request meets one of these in between and,
// answered 503, failed: an MCP client does not send a tools/call again by
// itself, so a steady stream of MCP calls through another node lost calls
// at every handover. A request the owner did not serve is now forwarded
// again — to whichever node holds the session by then, or served by this
// node once it takes the session itself — until forwardRetryFor has passed.
//
// A request is sent again only when the owner certainly did not serve it:
//   - the connection to the owner could not be made (a dial error), or
//     the request could not be written whole on it (a broken pipe);
//   - the owner closed the connection as idle (Go's http.Server does so
//     only on a connection with no request being read);
//   - the owner answered 503 with notServedHeader: it refused the request
//     before reaching the session because it is stopping, its store cannot
//     serve, or the session is moving — what passes — which the owner says
//     only then (not for a session that cannot be opened, which another
//     try would not change);
//   - or the request is a GET or HEAD, which serves nothing twice.
//
//   - or the owner dropped it unanswered and released the session's lease
//     within a few seconds: it stopped gracefully, and a graceful stop
//     answers every request it has read (ownerStopped).
//
// A request that reached the owner and got no answer while the owner
// kept the lease (it died while serving it) is not sent again — a
// tools/call may have run — and is answered 503 saying so: its outcome is
// in the session's log (a call whose handler died with its node ends
// unavailable there when the session is restored).
//
// WebSocket upgrades are not retried here: a WebSocket client reconnects
// on a 503 by itself, resuming with ?after=, and a proxied WebSocket
// cannot be replayed once it has begun.

// notServedHeader marks a 503 answer to a request that never reached its
// session (the node is stopping, its store cannot serve, the session is
// moving): the forwarding node may send such a request again.
const notServedHeader = "Brain-Not-Served"

const (
	// forwardRetryFor bounds how long a forwarded request is sent again:
	// longer than the default lease TTL (20 s, package store), so that a
	// request for a session whose owner died waits for its lease to lapse
	// and is then served by the next owner, rather than failing.
	forwardRetryFor = 30 * time.Second
	// maxReplayBody is the largest request body a forwarding node keeps to
	// send again; a larger one is forwarded once.
	maxReplayBody = 16 << 20
)

// errNotServed is ModifyResponse's verdict on an owner's notServedHeader
// answer: the request may be sent again.
var errNotServed = errors.New("the owner did not serve the request")

// replay is a forwarded request's state across its attempts, in its
// context (replayKey): the body, read once, and whether the attempt that
// just ended asked to be retried.
type replay struct {
	body     []byte
	buffered bool // body holds the whole request body
	again    bool // the attempt asks to be sent again
	final    bool // the last attempt: answer, do not ask again
}

type replayKey struct{}

// replayOf returns r's replay state, or nil when r is not retried.
func replayOf(r *http.Request) *replay {
	rp, _ := r.Context().Value(replayKey{}).(*replay)
	return rp
}

// retriesForwards reports whether r is a request this node forwards again
// when its session's owner did not serve it: a clustered node, a session
// request from a client (not one forwarded here), not a WebSocket upgrade.
func (srv *Server) retriesForwards(r *http.Request) bool {
	return srv.opts.Manager != nil && srv.opts.Manager.opts.Lease != nil &&
		strings.HasPrefix(r.URL.Path, "/v1/sessions/") &&
		r.Header.Get(forwardedHeader) == "" && r.Header.Get("Upgrade") == ""
}

// serveRetrying serves r through the mux, and again — after a short,
// growing pause — for as long as an attempt's forward says the owner did
// not serve it, within forwardRetryFor; the last attempt answers whatever
// it gets.
func (srv *Server) serveRetrying(w http.ResponseWriter, r *http.Request) {
	st := &replay{}
	ctx := context.WithValue(r.Context(), replayKey{}, st)
	deadline := time.Now().Add(forwardRetryFor)
	pause := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		st.again = false
		st.final = !time.Now().Before(deadline)
		try := r.WithContext(ctx)
		if attempt > 0 {
			try.Body = io.NopCloser(bytes.NewReader(st.body))
			try.ContentLength = int64(len(st.body))
		}
		srv.mux.ServeHTTP(w, try)
		if !st.again {
			return
		}
		t := time.NewTimer(min(pause, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			w.Header().Set("Retry-After", "1")
			httpError(w, http.StatusServiceUnavailable, "unavailable", "the session is moving between nodes; retry")
			return
		case <-t.C:
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// canRetry reports whether another try is allowed.
func (st *replay) canRetry() bool { return st != nil && !st.final && st.buffered }

// retry asks for r to be sent again, if it may be; it reports whether it
// did (then nothing has been written to the response).
func (st *replay) retry() bool {
	if !st.canRetry() {
		return false
	}
	st.again = true
	return true
}

// readBody reads r's body, once, into st for replay; a body larger than
// maxReplayBody is left to be forwarded once.
func (st *replay) readBody(r *http.Request) {
	if st == nil || st.buffered || st.again {
		return
	}
	if r.Body == nil || r.Body == http.NoBody {
		st.buffered = true
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxReplayBody+1))
	if err != nil || len(b) > maxReplayBody {
		// Forwarded once, as it comes: what was read, then the rest.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		return
	}
	st.body, st.buffered = b, true
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
}

// notDelivered reports whether err, a proxy's failure to get an answer
// from the owner, means the owner cannot have served the request: the
// connection was never made; the request could not be written whole (the
// owner had closed the connection: a broken pipe, a reset — and a handler
// acts on a whole request: the MCP endpoint decodes its body first); or
// the owner closed the connection as idle (Go's http.Server closes only
// connections on which no request is being read). An error reading the
// answer is none of these: the owner had the request.
func notDelivered(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "write" || op.Op == "readfrom") {
		return true
	}
	return strings.Contains(err.Error(), "server closed idle connection")
}

// ownerStopped reports whether the owner named by no, which dropped a
// request without answering it, released the session's lease within
// releaseWait: it stopped gracefully. A graceful stop answers every
// request it has read (it waits for those being answered, and refuses the
// rest unserved), so such a request was never read — it crossed the
// owner's listener closing, or a connection it closed as idle. An owner
// that died keeps holding the lease until it lapses: the request may have
// been served, and it is not sent again.
func (srv *Server) ownerStopped(ctx context.Context, no *NotOwnerError) bool {
	holder := srv.opts.Manager.opts.Holder
	if holder == nil {
		return false
	}
	deadline := time.Now().Add(releaseWait(srv.opts.Manager.opts.LeaseTTL))
	for {
		node, held, err := holder(ctx, no.Session)
		if err == nil && (!held || node != no.Node) {
			return true
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		t := time.NewTimer(50 * time.Millisecond) // polling the lease bucket, for at most releaseWait
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// releaseWait bounds how long a forwarding node waits for an owner that
// dropped a request to release the session's lease: a stopping node
// releases its leases right after its listener closes, in milliseconds.
// It stays under half the lease TTL: a holder renews every TTL/3, so the
// lease of one that died when it dropped the request lapses no sooner
// than 2/3 TTL later, and a lapse is never taken for a release.
func releaseWait(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = 20 * time.Second // package store's default
	}
	return min(3*time.Second, ttl/2)
}

// idempotent reports whether sending r twice serves nothing twice.
func idempotent(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

// notServed writes the 503 of a request that never reached its session:
// the client (or the node that forwarded it) may send it again.
func notServed(w http.ResponseWriter, msg string) {
	w.Header().Set(notServedHeader, "1")
	w.Header().Set("Retry-After", "1")
	httpError(w, http.StatusServiceUnavailable, "unavailable", msg)
}
