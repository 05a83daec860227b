package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
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
	brw.Writer = bufio.NewWriterSize(w.cc, brw.Writer.Size())
	return w.cc, brw, nil
}

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
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= maxCorked {
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
	return c.flushLocked()
}

// drop ends the cork and discards what it held (after a failed write: the
// connection is done, and later writes, such as a close frame, go straight
// to it and fail or not on their own).
func (c *corkConn) drop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.corked, c.buf = false, nil
	c.mu.Unlock()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > keptWriteBuffer {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// keptWriteBuffer is the largest cork buffer, and encoding buffer, a
// connection keeps between batches: a round trip's frames fit many times
// over; a snapshot's larger buffer is left to the collector, so that an
// idle connection holds little.
const keptWriteBuffer = 16 << 10

// corkConn returns the connection Hijack made; nil for a nil w, or before
// Hijack.
func (w *corkedWriter) corkConn() *corkConn {
	if w == nil {
		return nil
	}
	return w.cc
}
