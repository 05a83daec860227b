package server

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

// recordConn is a net.Conn that records each Write.
type recordConn struct {
	net.Conn
	mu     sync.Mutex
	writes []string
	err    error
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

// TestCorkConn: writes while corked leave in one write at flush, in order,
// whichever goroutine made them; uncorked writes go straight through; a
// batch over maxCorked is written as it goes, what was held first.
func TestCorkConn(t *testing.T) {
	t.Run("batch", func(t *testing.T) {
		rc := &recordConn{}
		c := &corkConn{Conn: rc}
		c.cork()
		_, _ = c.Write([]byte("a"))
		done := make(chan struct{})
		go func() { defer close(done); _, _ = c.Write([]byte("b")) }() // a pong from the reader
		<-done
		_, _ = c.Write([]byte("c"))
		if len(rc.writes) != 0 {
			t.Fatalf("written while corked: %q", rc.writes)
		}
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("d"))
		if want := []string{"abc", "d"}; strings.Join(rc.writes, "|") != strings.Join(want, "|") {
			t.Fatalf("writes %q, want %q", rc.writes, want)
		}
		if err := c.flush(); err != nil || len(rc.writes) != 2 {
			t.Fatalf("an empty flush wrote: %q %v", rc.writes, err)
		}
	})
	t.Run("over the bound", func(t *testing.T) {
		rc := &recordConn{}
		c := &corkConn{Conn: rc}
		c.cork()
		_, _ = c.Write([]byte("head"))
		big := bytes.Repeat([]byte("x"), maxCorked)
		_, _ = c.Write(big)
		_, _ = c.Write([]byte("tail"))
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
		if len(rc.writes) != 3 || rc.writes[0] != "head" || rc.writes[1] != string(big) || rc.writes[2] != "tail" {
			t.Fatalf("%d writes, want head, the big one, tail", len(rc.writes))
		}
	})
	t.Run("error", func(t *testing.T) {
		boom := errors.New("boom")
		rc := &recordConn{err: boom}
		c := &corkConn{Conn: rc}
		c.cork()
		_, _ = c.Write([]byte("a"))
		if err := c.flush(); !errors.Is(err, boom) {
			t.Fatalf("flush: %v, want %v", err, boom)
		}
		if _, err := c.Write([]byte("b")); !errors.Is(err, boom) {
			t.Fatalf("write: %v, want %v", err, boom)
		}
	})
	t.Run("drop", func(t *testing.T) {
		// What the batch held — a close frame another goroutine wrote
		// during it, say — is sent; later writes go straight through.
		rc := &recordConn{}
		c := &corkConn{Conn: rc}
		c.cork()
		_, _ = c.Write([]byte("a"))
		_, _ = c.Write([]byte("close"))
		c.drop()
		_, _ = c.Write([]byte("b"))
		if err := c.flush(); err != nil || strings.Join(rc.writes, "|") != "aclose|b" {
			t.Fatalf("writes %q, %v; want what was held, in one write, then the write after drop", rc.writes, err)
		}
	})
	t.Run("nil", func(t *testing.T) {
		var c *corkConn
		c.cork()
		c.drop()
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
	})
}
