package server

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// corkedWriter is the http.ResponseWriter given to websocket.Accept: its
// Hijack hands coder/websocket a connection whose writes can be held back
// and sent together (see corkConn), so that the frames a writer has ready
// at once — an ack, the event after it, the next call — leave in one
// write system call instead of one each.
type corkedWriter struct {
	http.ResponseWriter
	cc *corkConn // set by Hijack
}

// Hijack takes over the connection like the wrapped writer's, with the
// returned buffered writer writing through a corkConn.
func (w *corkedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("http.ResponseWriter does not implement http.Hijacker")
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 { // nothing is expected here; send it first if there is
		if err := brw.Writer.Flush(); err != nil {
			_ = conn.Close()
			return nil, nil, err
		}
	}
	w.cc = &corkConn{Conn: conn}
	// Small buffers of the connection's own instead of the server's 4 KiB
	// ones, which an idle connection would hold for its lifetime (it
	// outlives the request: ws.go). The reader's buffer holds a frame's
	// header and a small frame; a larger payload is read straight into
	// the frame's buffer. The writer's only gathers a frame's header and
	// the start of its payload before they reach the cork's buffer, which
	// batches the writes.
	if n := brw.Reader.Buffered(); n > 0 {
		// Read ahead by the server (a peer that sent its first frame
		// before the upgrade's answer): the cork's Read gives it first.
		// Not in br: coder/websocket would move what br buffers into a
		// reader of its own, where the reader's wait could not see it.
		ahead, _ := brw.Reader.Peek(n)
		w.cc.ahead = bytes.Clone(ahead)
		w.cc.aheadLeft.Store(true)
	}
	br := bufio.NewReaderSize(w.cc, readBufferSize)
	w.cc.waiter = newReadWaiter(conn, br, &w.cc.aheadLeft)
	return w.cc, bufio.NewReadWriter(br, bufio.NewWriterSize(w.cc, writeBufferSize)), nil
}

// The sizes of a connection's buffered reader and writer (see Hijack).
const (
	readBufferSize  = 512
	writeBufferSize = 256
)

// Unwrap returns the wrapped writer (for http.ResponseController).
func (w *corkedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// maxCorked bounds the bytes held back between a cork and its flush; a
// batch larger than that is written as it goes.
const maxCorked = 256 << 10

// corkConn is a net.Conn whose writes, while corked, are appended to a
// buffer that flush sends in one write. Only the connection's writer
// goroutine corks and flushes; other writes (coder/websocket's control
// frames: pongs, the close frame) may come from any goroutine and keep
// their order: a write while corked joins the buffer, and flush holds the
// lock while it writes.
type corkConn struct {
	net.Conn
	waiter *readWaiter // nil: the reader waits where it reads (idlewait.go)
	// ahead is what the HTTP server read of the connection past the
	// upgrade request, which Read gives before the connection's own bytes;
	// aheadLeft says some is left (for the reader's wait). Only
	// coder/websocket reads, one read at a time.
	ahead     []byte
	aheadLeft atomic.Bool
	// frames follows the frames read, and deadline says a read deadline
	// bounds the message they are within (see frameTracker).
	frames   frameTracker
	deadline bool
	mu       sync.Mutex
	corked   bool
	pooled   *[]byte // buf's pool entry, borrowed while corked (buffers.go)
	buf      []byte
}

// Read gives what the server read ahead first, then reads the connection;
// a message begun must arrive whole within frameReadTimeout (track).
func (c *corkConn) Read(p []byte) (n int, err error) {
	if c.aheadLeft.Load() {
		n = copy(p, c.ahead)
		if c.ahead = c.ahead[n:]; len(c.ahead) == 0 {
			c.ahead = nil
			c.aheadLeft.Store(false)
		}
	} else {
		n, err = c.Conn.Read(p)
	}
	if n > 0 {
		c.track(p[:n])
	}
	return n, err
}

// track sets the connection's read deadline when the bytes just read
// leave the peer within a message, and lifts it when they complete one
// (frameTracker): a message begun has frameReadTimeout to arrive, an
// idle connection has no bound. Setting or lifting it updates the
// runtime's poller timer (no system call, no allocation); a message that
// arrives in one read needs neither.
func (c *corkConn) track(b []byte) {
	switch within := c.frames.feed(b); {
	case within && !c.deadline:
		c.deadline = true
		_ = c.Conn.SetReadDeadline(time.Now().Add(frameReadTimeout.get())) // a closed connection fails the read anyway
	case !within && c.deadline:
		c.deadline = false
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= maxCorked {
		if c.pooled == nil {
			c.pooled = buffers.get()
			c.buf = *c.pooled
		}
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if len(c.buf) > 0 { // over the bound: what is held goes first
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// cork holds back writes until flush. A nil c does nothing.
func (c *corkConn) cork() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// flush ends the cork and writes what it held back in one write. A nil c
// has nothing to write.
func (c *corkConn) flush() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	err := c.flushLocked()
	c.releaseLocked()
	return err
}

// releaseLocked gives the buffer back to the pool: an idle connection
// holds none.
func (c *corkConn) releaseLocked() {
	if c.pooled != nil {
		buffers.put(c.pooled, c.buf)
	}
	c.pooled, c.buf = nil, nil
}

// drop ends the cork after a failed write: the connection is done, and
// later writes go straight to it and fail or not on their own. What the
// cork held is sent if it can be: a close frame that another goroutine
// wrote during the batch (Close with a code and reason, from the
// connection's end) joined it, and the write that failed next was
// coder/websocket refusing to write after that close — so dropping it lost
// the close, and the peer waited for it until coder/websocket gave up and
// closed the socket. Frames are whole in the buffer (coder/websocket
// writes one frame at a time), so the bytes sent are frames. A write that
// failed at the socket fails this one at once (a broken connection, or
// the batch's write deadline, passed).
func (c *corkConn) drop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.corked = false
	_ = c.flushLocked()
	c.releaseLocked()
	c.mu.Unlock()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// setWriteDeadline sets the connection's write deadline; the zero time
// lifts it. A nil c does nothing.
func (c *corkConn) setWriteDeadline(t time.Time) {
	if c != nil {
		_ = c.Conn.SetWriteDeadline(t) // on a closed connection the write fails anyway
	}
}

// waitReadable waits, near the top of the reader's stack, for the peer's
// next frame (idlewait.go), and reports whether the peer had been idle.
// A nil c returns at once.
func (c *corkConn) waitReadable() (idle bool) {
	return c != nil && c.waiter.wait()
}

// waits reports whether waitReadable waits for the socket (a plain TCP
// connection) rather than returning at once.
func (c *corkConn) waits() bool { return c != nil && c.waiter != nil && c.waiter.rc != nil }

// closing runs close, coder/websocket's Close from another goroutine than
// the reader, so that it and waitReadable do not race (idlewait.go). A
// nil c just runs close.
func (c *corkConn) closing(close func()) {
	if c == nil {
		close()
		return
	}
	c.waiter.closing(close)
}

// corkConn returns the connection Hijack made; nil for a nil w, or before
// Hijack.
func (w *corkedWriter) corkConn() *corkConn {
	if w == nil {
		return nil
	}
	return w.cc
}
