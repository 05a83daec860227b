package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

// wsFrame is one frame on the wire: opcode op, FIN when fin, a payload of
// n bytes, masked when masked (a client's frames are).
func wsFrame(op byte, fin, masked bool, n int) []byte {
	b := []byte{op, 0}
	if fin {
		b[0] |= 0x80
	}
	switch {
	case n < 126:
		b[1] = byte(n)
	case n <= 0xffff:
		b[1] = 126
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b[1] = 127
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if masked {
		b[1] |= 0x80
		b = append(b, 1, 2, 3, 4)
	}
	return append(b, bytes.Repeat([]byte{'x'}, n)...)
}

// trackerStream is frames one after another, and the offsets in it where
// the peer is between messages (after each message's last frame, and
// after a control frame outside a fragmented message).
func trackerStream() (stream []byte, between map[int]bool) {
	between = map[int]bool{0: true}
	add := func(f []byte, endsMessage bool) {
		stream = append(stream, f...)
		if endsMessage {
			between[len(stream)] = true
		}
	}
	add(wsFrame(0x1, true, true, 60), true)     // a text frame
	add(wsFrame(0x9, true, true, 4), true)      // a ping between messages
	add(wsFrame(0x1, true, true, 0), true)      // an empty one
	add(wsFrame(0x1, true, true, 300), true)    // a 16-bit length
	add(wsFrame(0x2, true, false, 70000), true) // a 64-bit length, unmasked
	add(wsFrame(0x1, false, true, 10), false)   // a fragmented message: its first fragment,
	add(wsFrame(0x9, true, true, 2), false)     // a ping within it,
	add(wsFrame(0x0, false, true, 0), false)    // an empty continuation,
	add(wsFrame(0x0, true, true, 200), true)    // its last fragment
	add(wsFrame(0x8, true, true, 2), true)      // a close
	return stream, between
}

// TestFrameTracker: fed a stream of frames in pieces of any size, the
// tracker says the peer is within a message exactly where it is.
func TestFrameTracker(t *testing.T) {
	stream, between := trackerStream()
	for _, size := range []int{1, 2, 3, 5, 7, 13, 64, 511, 512, 4096, len(stream)} {
		var tr frameTracker
		for at := 0; at < len(stream); {
			end := min(at+size, len(stream))
			if got := tr.feed(stream[at:end]); got != !between[end] {
				t.Fatalf("pieces of %d, after byte %d of %d: within a message %v, want %v", size, end, len(stream), got, !between[end])
			}
			at = end
		}
	}
	// Every place a stream can be cut in two, for the frames before the
	// large one.
	short := stream[:bytes.Index(stream, wsFrame(0x2, true, false, 70000)[:10])]
	for cut := 0; cut <= len(short); cut++ {
		var tr frameTracker
		tr.feed(short[:cut])
		if got := tr.feed(short[cut:]); got {
			t.Fatalf("cut at %d: within a message after the whole stream", cut)
		}
	}
}

// FuzzFrameTracker: any bytes, cut anywhere, leave the tracker as fed
// whole, and never make it fail.
func FuzzFrameTracker(f *testing.F) {
	stream, _ := trackerStream()
	f.Add(stream[:500], uint16(7))
	f.Add([]byte{0x81, 0xff, 0, 0, 0, 0, 0, 0, 0, 9}, uint16(3))
	f.Add([]byte{0x01, 0x80, 1, 2, 3, 4, 0x80, 0x00}, uint16(6))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		c := int(cut) % (len(b) + 1)
		var whole, split frameTracker
		w := whole.feed(b)
		split.feed(b[:c])
		s := split.feed(b[c:])
		if w != s || whole != split {
			t.Fatalf("fed whole: %v %+v; cut at %d: %v %+v", w, whole, c, s, split)
		}
	})
}

// TestPeerCloseReasonFits: the reason a peer is given fits a close frame
// however long its cause (a longer one would reach it as 1011 without
// any), and a message that did not arrive in time is named as
// docs/protocol.md says.
func TestPeerCloseReasonFits(t *testing.T) {
	long := errors.New("read: " + strings.Repeat("a cause that goes on ", 20))
	if got := peerCloseReason(long); len(got) > maxCloseReason || !strings.HasPrefix(got, "read: a cause") {
		t.Errorf("a long cause gave the reason %q (%d bytes), want its start within %d", got, len(got), maxCloseReason)
	}
	if got := peerCloseReason(readError(os.ErrDeadlineExceeded)); got != "a frame was begun and not completed within 1m0s" {
		t.Errorf("a message not in time gave the reason %q", got)
	}
	if got := peerCloseReason(errors.New("write: the peer has not read for 10s")); got != "write: the peer has not read for 10s" {
		t.Errorf("a short cause gave the reason %q", got)
	}
}
