package server

import (
	"context"
	"crypto/subtle"
	"net/http"
)

// A WebSocket outlives the request that authenticated it, so a token
// removed from tokens.json (or given another side, name, tenant or app)
// was refused from the next request on, while the sockets it had opened
// went on acting with the old grant: a probe's removed client token went
// on registering capabilities, a removed operator's approvals stream went
// on streaming. Each token that opens a socket gets an end (Tokens.End),
// done when a Replace no longer grants what the token was granted; its
// sockets close with it (conn_end.go), 4401 with the reason.

// errTokenRevoked ends the sockets of a token tokens.json no longer grants.
var errTokenRevoked = newCloseError(4401, "the token was removed from tokens.json, or its grant changed: connect again with a valid token")

// tokenEnd is the end of a token's sockets, and the grant they were
// opened under.
type tokenEnd struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	grant  Token
}

// End returns the end of the sockets token opens: done, with
// errTokenRevoked as its cause, once tokens.json no longer grants token
// what it grants now. Nil for a token that is not one.
func (t *Tokens) End(token string) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	var grant Token
	ok := false
	for i := range t.list {
		if subtle.ConstantTimeCompare([]byte(t.list[i].Token), []byte(token)) == 1 {
			grant, ok = t.list[i], true
		}
	}
	if !ok {
		return nil
	}
	if e, ok := t.ends[token]; ok {
		return e.ctx
	}
	if t.ends == nil {
		t.ends = map[string]*tokenEnd{}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	t.ends[token] = &tokenEnd{ctx: ctx, cancel: cancel, grant: grant}
	return ctx
}

// revokeEnds ends the sockets of the tokens whose grant list no longer
// holds, and returns what ends them; t.mu is held.
func (t *Tokens) revokeEnds(list []Token) (ended []context.CancelCauseFunc) {
	if len(t.ends) == 0 {
		return nil
	}
	grants := make(map[string]Token, len(list)) // a file of thousands of tokens, each with sockets
	for _, g := range list {
		grants[g.Token] = g
	}
	for token, e := range t.ends {
		if g, ok := grants[token]; !ok || g != e.grant {
			ended = append(ended, e.cancel)
			delete(t.ends, token)
		}
	}
	return ended
}

// withTokenEnd gives a request that stays open — a WebSocket handshake,
// the GET of an MCP session's event stream, a POST whose tools/call waits
// for its result or a person's approval — its bearer token's end,
// unless it has an end already (a console sign-in's, which ends with its
// operator token too).
func (srv *Server) withTokenEnd(r *http.Request) *http.Request {
	stays := isWebSocketHandshake(r) || r.Pattern == mcpPattern
	if !stays || connEnd(r.Context()) != nil || srv.opts.Tokens == nil {
		return r
	}
	end := srv.opts.Tokens.End(bearerToken(r))
	if end == nil {
		return r
	}
	return r.WithContext(withConnEnd(r.Context(), end))
}
