package server

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// readWaiter lets a connection's reader wait for its peer's next frame
// near the top of its goroutine's stack instead of deep inside
// coder/websocket's frame reader. An idle connection's goroutine spends
// its life in that wait, and the collector shrinks a parked goroutine's
// stack only to what it uses there: waiting deep held 8 KiB a client
// (issue 21), waiting here lets the stack shrink to a few (see wait).
//
// It works on plain TCP connections (the fd is polled, nothing is read);
// on others, TLS among them, wait returns at once and the reader waits
// where it reads.
type readWaiter struct {
	br    *bufio.Reader   // coder/websocket's buffered reader of the connection
	ahead *atomic.Bool    // bytes the HTTP server read ahead are left (corkConn)
	rc    syscall.RawConn // the connection's descriptor; nil: wait does nothing
	// mu orders wait's look at br with the one other reader of br:
	// coder/websocket's Close, which reads the peer's close frame itself
	// when no frame is being read (see closing).
	mu sync.Mutex
}

func newReadWaiter(conn net.Conn, br *bufio.Reader, ahead *atomic.Bool) *readWaiter {
	w := &readWaiter{br: br, ahead: ahead}
	if sc, ok := conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			w.rc = rc
		}
	}
	return w
}

// wait returns once the connection has something to read — buffered
// already, or in the socket — or has failed or closed (the read that
// follows says which), and reports whether the peer had been idle: the
// wait lasted idleWait or more. A nil w returns at once. Only the
// connection's reader calls it, between frames.
func (w *readWaiter) wait() (idle bool) {
	if w == nil || w.rc == nil {
		return false
	}
	w.mu.Lock()
	buffered := w.br.Buffered()
	w.mu.Unlock()
	if buffered > 0 || w.ahead.Load() {
		return false
	}
	start := time.Now()
	// Peeked each time it is woken too: a wake may be stale (readiness
	// the poller saw for data already read, while the reader was not
	// waiting), and waiting on in the frame reader is what this avoids.
	_ = w.rc.Read(socketReadable)
	return time.Since(start) >= idleWait
}

// closing runs close — coder/websocket's Conn.Close, from another
// goroutine than the reader — so that wait does not look at the buffer
// while close reads from it. A wait already polling the socket goes on
// until the peer's close frame arrives, then finds the connection closed.
// A nil w just runs close.
func (w *readWaiter) closing(close func()) {
	if w == nil {
		close()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	close()
}
