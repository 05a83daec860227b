package mcpbridge

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// applied tracks how far the follow goroutine has applied the session's
// events to the tool list, so that a request can wait until the list
// reflects everything the session had when the request arrived.
//
// Why: a client's capability_register is acknowledged once the session has
// it, but the tool list learns of it from the event, a moment later; a
// tools/call sent right after the ack would otherwise meet "unknown tool".
type applied struct {
	mu   sync.Mutex
	seq  uint64
	wake chan struct{} // closed when seq grows; nil when nobody waits
}

func (a *applied) set(seq uint64) {
	a.mu.Lock()
	if seq > a.seq {
		a.seq = seq
		if a.wake != nil {
			close(a.wake)
			a.wake = nil
		}
	}
	a.mu.Unlock()
}

// wait returns once seq is applied, the follower stops (done), or ctx ends.
func (a *applied) wait(ctx context.Context, seq uint64, done <-chan struct{}) {
	for {
		a.mu.Lock()
		if a.seq >= seq {
			a.mu.Unlock()
			return
		}
		if a.wake == nil {
			a.wake = make(chan struct{})
		}
		w := a.wake
		a.mu.Unlock()
		select {
		case <-w:
		case <-done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// catchUp is receiving middleware: tools/list and tools/call first wait
// until the tool list has applied every event the session had when the
// request arrived.
func (srv *Server) catchUp(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/call" || method == "tools/list" {
			srv.applied.wait(ctx, srv.s.LastSeq(), srv.done)
		}
		return next(ctx, method, req)
	}
}
