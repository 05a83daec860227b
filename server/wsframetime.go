package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"
)

// frameReadTimeout bounds how long a message may take to arrive
// once its first bytes have: a peer that begins a frame and stops would
// otherwise hold the goroutine reading it — its connection's, or one of
// the server's shared frame readers (readFrameWhere) — for as long as it
// keeps the connection open. A minute is generous: a whole frame
// (protocol.MaxFrameBytes, 1 MiB) arrives within it at 140 kbit/s, and
// one too large to apply (up to hardMessageLimit, which is read and
// dropped) at 9 Mbit/s. Waiting between messages has no bound: an idle
// connection is what a client keeps.
var frameReadTimeout = newTunable(time.Minute)

// errFrameIncomplete is the cause of a connection ended because a frame
// did not arrive whole within frameReadTimeout (peerCloseReason).
var errFrameIncomplete = errors.New("a frame was begun and not completed in time")

// readError is the cause of a connection ended by a failed read: the
// read's error, or errFrameIncomplete for the deadline a frameTracker set.
func readError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("read: %w (within %s): %w", errFrameIncomplete, frameReadTimeout.get(), err)
	}
	return fmt.Errorf("read: %w", err)
}

// frameTracker follows the WebSocket frames (RFC 6455, 5.2) in the bytes
// a connection reads, as they come off it, to tell whether the peer is
// between messages or within one: a message begun — a frame's first
// bytes, or the first fragment of a fragmented message — must arrive
// whole within frameReadTimeout, and corkConn.Read sets the connection's
// read deadline then and lifts it once the message is in. Between
// messages there is no deadline, however long the peer is idle; a
// control frame (a ping) between messages is a message of its own, so a
// peer that pings and then idles is idle.
//
// It reads only frame headers — the payload is skipped by its length —
// and decides nothing about the frames: coder/websocket reads and checks
// the same bytes (a malformed header ends the connection there). It sees
// the bytes in TLS's plaintext as in plain TCP's, so the bound holds on
// both. Only the reading goroutine uses it (coder/websocket reads one
// read at a time).
type frameTracker struct {
	header  [14]byte // the current frame's header so far
	got     int      // bytes of header; 0 between frames
	payload uint64   // payload bytes of the current frame still to come, once its header is in
	// fragmented: a data frame without FIN was read; the message ends
	// with the data frame that has it (control frames come in between).
	fragmented bool
}

// feed follows b, the next bytes read, and reports whether the peer is
// within a message after them.
func (t *frameTracker) feed(b []byte) (within bool) {
	for len(b) > 0 {
		if t.payload > 0 {
			n := min(t.payload, uint64(len(b)))
			t.payload -= n
			b = b[n:]
			continue
		}
		// Collecting a header: its first two bytes say how long it is.
		need := 2
		if t.got >= 2 {
			need = headerSize(t.header[1])
		}
		n := copy(t.header[t.got:need], b)
		t.got += n
		b = b[n:]
		if t.got >= 2 && t.got == headerSize(t.header[1]) {
			t.frameHeader()
		}
	}
	return t.got > 0 || t.payload > 0 || t.fragmented
}

// headerSize is the size of a frame's header by its second byte: two
// bytes, the extended length (2 or 8 bytes), the masking key (4).
func headerSize(second byte) int {
	n := 2
	switch second & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if second&0x80 != 0 {
		n += 4
	}
	return n
}

// frameHeader takes the complete header in t.header: its payload follows
// (none: the frame is in).
func (t *frameTracker) frameHeader() {
	h := t.header[:t.got]
	t.got = 0
	fin, opcode := h[0]&0x80 != 0, h[0]&0x0f
	switch n := h[1] & 0x7f; n {
	case 126:
		t.payload = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		t.payload = binary.BigEndian.Uint64(h[2:10])
	default:
		t.payload = uint64(n)
	}
	if opcode < 0x8 { // data or continuation; control frames do not end a message
		t.fragmented = !fin
	}
}
