package server

import (
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Store faults are not session faults. When the session store — a NATS
// cluster — cannot serve, a client is told so precisely and told to come
// back, never handed an opaque error or a dropped connection:
//
//   - a request that needs the store gets 503 unavailable with
//     Retry-After and the store's own sentence ("the session store has no
//     quorum: 1 of 3 NATS servers reachable");
//   - a WebSocket whose session this node stops serving closes with a
//     code and a reason — 1013 (try again later) and the store's sentence
//     when the store is at fault, 1012 (service restart) when the session
//     moves to another node — never a bare 1006;
//   - GET /readyz turns 503 with the same sentence, and /metrics shows it
//     (brain_store_ready).
//
// A store says what is wrong through its errors: package store's
// *UnavailableError has the method below, anywhere in the chain.

// storeFault is an error of a store that cannot serve (package store's
// *UnavailableError): StoreUnavailable says what is wrong, naming the
// store, in words a client is shown.
type storeFault interface {
	StoreUnavailable() string
}

// storeFaultOf returns what a store's error says is wrong with it, and
// whether err is one.
func storeFaultOf(err error) (string, bool) {
	var sf storeFault
	if errors.As(err, &sf) {
		if msg := sf.StoreUnavailable(); msg != "" {
			return msg, true
		}
	}
	return "", false
}

// closeError ends a WebSocket connection with a close code and a reason
// (the close handshake), as the cause of its context.
type closeError struct {
	code   websocket.StatusCode
	reason string
}

func (e *closeError) Error() string { return e.reason }

// newCloseError returns a closeError whose reason fits a close frame (123
// bytes, cut at a character's boundary).
func newCloseError(code websocket.StatusCode, reason string) *closeError {
	const maxReason = 123
	if len(reason) > maxReason {
		cut := maxReason
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	return &closeError{code: code, reason: reason}
}

// closeCause returns the closeError in cause's chain, if any.
func closeCause(cause error) (*closeError, bool) {
	var ce *closeError
	ok := errors.As(cause, &ce)
	return ce, ok
}

// movedReason is the close reason of a session that moves to another
// node (its lease was taken, or given up after its journal failed).
const movedReason = "the session moves to another node: reconnect with ?after="

// reloadCause ends the connections of a session on a node of its own
// whose journal failed: 1013 and the store's sentence when it says what is
// wrong, else 1012 saying the session is loaded again (not, as in a
// cluster, that it moves to another node).
func reloadCause(err error) *closeError {
	if msg, ok := storeFaultOf(err); ok {
		return newCloseError(websocket.StatusTryAgainLater, msg)
	}
	return errReloaded
}

var errReloaded = newCloseError(websocket.StatusServiceRestart, "the session's journal failed: reconnect with ?after= and it is loaded again from what its journal holds")

// errUnjournaled ends a connection whose session's journal failed.
var errUnjournaled = newCloseError(websocket.StatusServiceRestart, movedReason)

// leaveCause is the cause that ends the connections of a session this
// node stops serving because of err (its lease lost, or its journal
// failed): the store's sentence with 1013 when the store is at fault,
// 1012 otherwise.
func leaveCause(err error) *closeError {
	if msg, ok := storeFaultOf(err); ok {
		return newCloseError(websocket.StatusTryAgainLater, msg)
	}
	return errUnjournaled
}

// storeUnavailable answers a request the store could not serve: 503
// unavailable, Retry-After, and what is wrong with the store.
func storeUnavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	httpError(w, http.StatusServiceUnavailable, "unavailable", msg)
}

// journalFault is a journal append the store refused on a node of its
// own. For journalFaultFor after the latest one, /readyz is 503 with what
// the store said: a full disk had left it 200 while every session's
// appends failed. A store that fails on, fails each session reloaded, and
// so keeps the node not ready; one that recovers is ready again once the
// time has passed without a failure.
type journalFault struct {
	err error
	at  time.Time
}

func (f *journalFault) message() string {
	if msg, ok := storeFaultOf(f.err); ok {
		return msg
	}
	return "the session store refused to store an event (" + f.err.Error() + "); sessions whose journal failed are loaded again from the store on their next connection"
}

// journalFaultFor: see journalFault.
var journalFaultFor = newTunable(30 * time.Second)

// handleReady is GET /readyz: 200 while this node can serve sessions, 503
// unavailable with the reason while it stops or its store cannot serve
// (Options.Ready). Unauthenticated, like /healthz: a load balancer asks.
func (srv *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if srv.opts.Manager.isStopping() {
		storeUnavailable(w, ErrStopping.Error())
		return
	}
	if f := srv.opts.Manager.journalFault.Load(); f != nil && time.Since(f.at) < journalFaultFor.get() {
		storeUnavailable(w, f.message())
		return
	}
	if f := srv.opts.Ready; f != nil {
		if err := f(); err != nil {
			storeUnavailable(w, err.Error())
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ready\n"))
}

// isStopping reports whether a stop has begun (shutdown.go).
func (m *Manager) isStopping() bool { return m.stopping.Load() }
