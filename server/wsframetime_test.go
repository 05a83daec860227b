package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/brainrt/brain/server"
)

// readCloseFrame reads the kernel's frames until its close frame, and
// returns the close's code and reason; it fails when the connection ends
// without one.
func (p *rawPeer) readCloseFrame() (uint16, string) {
	p.t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(p.br, h[:]); err != nil {
			p.t.Fatalf("the connection ended without a close frame: %v", err)
		}
		n := int(h[1] & 0x7f)
		if n == 126 {
			var l [2]byte
			if _, err := io.ReadFull(p.br, l[:]); err != nil {
				p.t.Fatalf("read: %v", err)
			}
			n = int(binary.BigEndian.Uint16(l[:]))
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(p.br, b); err != nil {
			p.t.Fatalf("read: %v", err)
		}
		if h[0]&0x0f == 0x8 && len(b) >= 2 {
			return binary.BigEndian.Uint16(b), string(b[2:])
		}
	}
}

// TestIncompleteFrameEndsItsConnection: a peer that begins a frame and
// stops has its connection closed (1008, saying why) once the frame has
// not arrived whole within the frame timeout — whether the frame was read
// by a shared frame reader (a connection's first) or on the connection's
// own goroutine — and the reader is free again (the close frame is its
// end's); a connection idle between
// frames for longer than that stays open.
func TestIncompleteFrameEndsItsConnection(t *testing.T) {
	const timeout = 300 * time.Millisecond
	server.SetFrameReadTimeout(t, timeout)
	server.SetHandOffFor(t, 0) // a connection's frames after its first are read on its own goroutine
	f := newFixture(t, nil)
	idle := dialRaw(t, f, "idle", nil)
	idle.write(probe(t, "i1", 60))
	idle.replies("i1")
	for _, c := range []struct {
		what, id string
		before   bool // a whole frame first: the incomplete one is read on the connection's goroutine
	}{{"the first frame, on a shared reader", "first", false}, {"a later frame, on the connection's goroutine", "later", true}} {
		t.Run(c.what, func(t *testing.T) {
			p := dialRaw(t, f, c.id, nil)
			if c.before {
				p.write(probe(t, "w", 60))
				p.replies("w")
			}
			fr := probe(t, "x", 300)
			p.write(fr[:3]) // its header's start, then nothing
			code, reason := p.readCloseFrame()
			if want := fmt.Sprintf("a frame was begun and not completed within %s", timeout); code != 1008 || reason != want {
				t.Errorf("closed with %d %q, want 1008 %q", code, reason, want)
			}
			if _, err := p.br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Errorf("after the close frame: %v, want the connection closed", err)
			}
		})
	}
	// idle has not sent anything for longer than the frame timeout (both
	// connections above were closed after it, each after its own
	// timeout): it was never bounded, and goes on.
	idle.write(probe(t, "i2", 60))
	idle.replies("i2")
}
