package server

import "context"

// A WebSocket may come with an end of its own besides its session's and
// its peer's: the console's sign-in it was opened under, which a
// sign-out, the operator token's removal or the sign-in's expiry ends
// (console_ends.go), or the token it was opened with, which a reload of
// tokens.json that no longer grants it ends (tokens_end.go; an MCP
// session's event stream too). The socket outlives the request that opened it, so
// the request's context cannot carry the end; the end travels as a
// context value, and the socket closes with its cause when it is done.

type connEndKey struct{}

// withConnEnd returns ctx carrying end: the WebSockets a request with
// this context opens close when end is done, with its cause (a
// *closeError says the close code and reason).
func withConnEnd(ctx, end context.Context) context.Context {
	return context.WithValue(ctx, connEndKey{}, end)
}

// connEnd returns the end a request's WebSockets have, or nil.
func connEnd(ctx context.Context) context.Context {
	end, _ := ctx.Value(connEndKey{}).(context.Context)
	return end
}

// endWith has cancel called with end's cause once end is done, and
// returns what releases that (call it when the connection ends first).
// Without an end it does nothing.
func endWith(end context.Context, cancel context.CancelCauseFunc) (release func() bool) {
	if end == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(end, func() { cancel(context.Cause(end)) })
}
