package server

import (
	"context"
	"sync"
	"time"

	"github.com/brainrt/brain/session"
)

// A console sign-in is checked on every request, but its WebSockets — a
// session's events and commands, the approvals inbox — are upgraded once
// and then outlive it: a probe signed out in one tab (and, apart, removed
// the operator token) and the other tab's sockets went on starting turns
// and streaming every new approval. So each sign-in with open sockets has
// an end (a context) that the sockets close with (conn_end.go), ended
// when the sign-in is: at its sign-out, when the tokens change and its
// operator token is no longer one, and when it expires.

// errSignInEnded closes the sockets of a sign-in that ended. 4401 is a
// close code of the application's range: the console's page tells it
// from a drop and shows the sign-in form.
var errSignInEnded = newCloseError(4401, "the console sign-in ended: sign in again")

// signInEnds are the ends of the sign-ins that opened sockets.
type signInEnds struct {
	mu   sync.Mutex
	live map[[signinIDLen]byte]*signInEnd
}

type signInEnd struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	token  string      // the operator token the sign-in was made with
	expiry *time.Timer // ends it when it expires
}

// of returns the end of sign-in cl, made on its first socket.
func (e *signInEnds) of(cl signinClaims, now time.Time) context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.live[cl.id]; x != nil {
		return x.ctx
	}
	if e.live == nil {
		e.live = map[[signinIDLen]byte]*signInEnd{}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	x := &signInEnd{ctx: ctx, cancel: cancel, token: cl.token}
	id := cl.id
	x.expiry = time.AfterFunc(cl.expires.Sub(now), func() { e.end(id) })
	e.live[id] = x
	return ctx
}

// end closes the sockets of sign-in id, if it has any.
func (e *signInEnds) end(id [signinIDLen]byte) {
	e.mu.Lock()
	x := e.live[id]
	delete(e.live, id)
	e.mu.Unlock()
	if x != nil {
		x.expiry.Stop()
		x.cancel(errSignInEnded)
	}
}

// recheck ends the sign-ins whose operator token no longer is one
// (tokens.json changed: Tokens.OnReplace).
func (e *signInEnds) recheck(tokens *Tokens) {
	e.mu.Lock()
	var ended [][signinIDLen]byte
	for id, x := range e.live {
		if p, ok := tokens.Peer(x.token); !ok || p.Side != session.SideOperator {
			ended = append(ended, id)
		}
	}
	e.mu.Unlock()
	for _, id := range ended {
		e.end(id)
	}
}
