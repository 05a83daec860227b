package server

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// frameReadTimeout bounds how long a frame may take to arrive once its
// first bytes have: a peer that begins a frame and stops would otherwise
// hold the goroutine reading it — its connection's, or one of the
// server's shared frame readers (readFrameWhere) — for as long as it
// keeps the connection open. A minute is generous: a whole frame
// (protocol.MaxFrameBytes, 1 MiB) arrives within it at 140 kbit/s, and
// one too large to apply (up to hardMessageLimit, which is read and
// dropped) at 9 Mbit/s. Waiting between frames has no bound: an idle
// connection is what a client keeps.
const defaultFrameReadTimeout = time.Minute

// frameTimeoutForTests replaces defaultFrameReadTimeout when set (ns):
// atomic, since a connection an earlier test left may still be reading.
var frameTimeoutForTests atomic.Int64

// frameReadTimeout returns the bound on a frame's arrival.
func frameReadTimeout() time.Duration {
	if d := frameTimeoutForTests.Load(); d > 0 {
		return time.Duration(d)
	}
	return defaultFrameReadTimeout
}

// errFrameIncomplete is the cause of a connection ended because a frame
// did not arrive whole within frameReadTimeout (closeReason).
var errFrameIncomplete = errors.New("a frame was begun and not completed in time")

// readError is the cause of a connection ended by a failed read: the
// read's error, or errFrameIncomplete for the read deadline frameBegun set.
func readError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("read: %w (within %s): %w", errFrameIncomplete, frameReadTimeout(), err)
	}
	return fmt.Errorf("read: %w", err)
}

// frameBegun sets the read deadline of the frame whose first bytes
// waitReadable saw: the rest must follow within frameReadTimeout. On a
// connection where waitReadable cannot see the socket (TLS: it returns at
// once, idle or not) a deadline would also end idle connections, so there
// is none. A nil c does nothing.
func (c *corkConn) frameBegun() {
	if c.waits() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(frameReadTimeout())) // a closed connection fails the read anyway
	}
}

// frameRead lifts the deadline frameBegun set, for the wait for the next
// frame. A nil c does nothing.
func (c *corkConn) frameRead() {
	if c.waits() {
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}
