package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/server"
)

// readOp reads the kernel's frames until one with opcode op, and returns
// its payload; it fails when the connection ends first (readAnyFrame).
func (p *rawPeer) readOp(op byte) []byte {
	p.t.Helper()
	for {
		if got, b := p.readAnyFrame(); got == op {
			return b
		}
	}
}

// wantClosedFor reads until the kernel's close frame and checks that it
// is a 1008 naming the frame timeout, and that the connection then ends.
func (p *rawPeer) wantClosedFor(timeout time.Duration) {
	p.t.Helper()
	b := p.readOp(0x8)
	if len(b) < 2 {
		p.t.Fatalf("a close frame of %d bytes", len(b))
	}
	code, reason := binary.BigEndian.Uint16(b), string(b[2:])
	if want := fmt.Sprintf("a frame was begun and not completed within %s", timeout); code != 1008 || reason != want {
		p.t.Errorf("closed with %d %q, want 1008 %q", code, reason, want)
	}
	if _, err := p.br.ReadByte(); !errors.Is(err, io.EOF) {
		p.t.Errorf("after the close frame: %v, want the connection closed", err)
	}
}

// wantLogged waits for a record msg whose reason starts with reason.
func wantLogged(t *testing.T, logs <-chan slog.Record, msg, reason string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case r := <-logs:
			found := false
			r.Attrs(func(a slog.Attr) bool {
				found = found || a.Key == "reason" && strings.HasPrefix(a.Value.String(), reason)
				return true
			})
			if r.Message == msg && found {
				return
			}
		case <-timeout:
			t.Fatalf("no %q logged with a reason starting %q", msg, reason)
		}
	}
}

// clientFrame is a client's frame (masked) with opcode op and payload,
// FIN set when fin.
func clientFrame(op byte, fin bool, payload string) []byte {
	b := maskedFrame([]byte(payload))
	b[0] = op
	if fin {
		b[0] |= 0x80
	}
	return b
}

// TestIncompleteMessageEndsItsConnection: a peer that begins a message
// and stops has its connection closed (1008, saying why) once the message
// has not arrived whole within the frame timeout — a frame cut short,
// whether read by a shared frame reader (a connection's first) or on the
// connection's own goroutine, and a fragmented message whose last
// fragment never comes; the close frame is the reader's end, so the
// reader is free again. A connection idle between messages for longer
// than that stays open, and so does one that pinged and then went idle.
func TestIncompleteMessageEndsItsConnection(t *testing.T) {
	const timeout = 300 * time.Millisecond
	server.SetFrameReadTimeout(t, timeout)
	server.SetHandOffFor(t, 0) // a connection's frames after its first are read on its own goroutine
	logs := make(chan slog.Record, 4096)
	f := newFixture(t, &server.Options{Logger: slog.New(chanHandler(logs))})
	idle := dialRaw(t, f, "idle", nil)
	idle.write(probe(t, "i1", 60))
	idle.replies("i1")
	pinged := dialRaw(t, f, "pinged", nil)
	pinged.write(probe(t, "p1", 60))
	pinged.replies("p1")
	pinged.write(clientFrame(0x9, true, "are you there"))
	if pong := pinged.readOp(0xa); string(pong) != "are you there" {
		t.Fatalf("pong %q", pong)
	}
	for _, c := range []struct {
		what, id string
		before   bool   // a whole frame first: the incomplete one is read on the connection's goroutine
		send     []byte // then this, and nothing more
	}{
		{"a first frame cut short, on a shared reader", "first", false, probe(t, "x", 300)[:3]},
		{"a later frame cut short, on the connection's goroutine", "later", true, probe(t, "x", 300)[:100]},
		{"a fragmented message without its last fragment", "fragments", true, clientFrame(0x1, false, `{"v":2,`)},
	} {
		t.Run(c.what, func(t *testing.T) {
			p := dialRaw(t, f, c.id, nil)
			if c.before {
				p.write(probe(t, "w", 60))
				p.replies("w")
			}
			p.write(c.send)
			p.wantClosedFor(timeout)
			wantLogged(t, logs, "peer disconnected", fmt.Sprintf("read: a frame was begun and not completed in time (within %s)", timeout))
		})
	}
	// Both have been idle for longer than the frame timeout (each case
	// above was closed after one): neither was bounded.
	idle.write(probe(t, "i2", 60))
	idle.replies("i2")
	pinged.write(probe(t, "p2", 60))
	pinged.replies("p2")
}

// TestIncompleteMessageOverTLS: the frame timeout holds over TLS as over
// plain TCP (the kernel follows the frames in TLS's plaintext), and an
// idle TLS connection stays open.
func TestIncompleteMessageOverTLS(t *testing.T) {
	const timeout = 300 * time.Millisecond
	server.SetFrameReadTimeout(t, timeout)
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(server.New(server.Options{Tokens: tokens, Manager: server.NewManager(server.ManagerOptions{})}))
	t.Cleanup(ts.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	host := strings.TrimPrefix(ts.URL, "https://")
	dial := func(id string) *rawPeer {
		conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		return openRaw(t, conn, host, id, nil)
	}
	idle := dial("tls-idle")
	idle.write(probe(t, "i1", 60))
	idle.replies("i1")
	p := dial("tls-cut")
	p.write(probe(t, "x", 300)[:50])
	p.wantClosedFor(timeout)
	idle.write(probe(t, "i2", 60))
	idle.replies("i2")
}
