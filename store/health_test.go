package store

import (
	"net"
	"testing"
	"time"
)

// TestReachable: a server is reachable when it greets a connection with
// an INFO line; a port that refuses, or a listener that accepts and says
// nothing (a stopped process's backlog), is not.
func TestReachable(t *testing.T) {
	greets := listen(t, func(c net.Conn) { _, _ = c.Write([]byte("INFO {\"server_id\":\"x\"}\r\n")) })
	silent := listen(t, func(c net.Conn) {})
	other := listen(t, func(c net.Conn) { _, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n")) })
	refused := listen(t, nil)
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"nats://" + greets, true},
		{greets, true}, // host:port without a scheme
		{"nats://" + silent, false},
		{"nats://" + other, false},
		{"nats://" + refused, false},
	} {
		start := time.Now()
		if got := reachable(tc.url); got != tc.want {
			t.Errorf("reachable(%s) = %v, want %v", tc.url, got, tc.want)
		}
		if took := time.Since(start); took > 3*probeTimeout {
			t.Errorf("reachable(%s) took %s, bound %s", tc.url, took, probeTimeout)
		}
	}
	if n := countReachable([]string{"nats://" + greets, "nats://" + refused, "nats://" + greets}); n != 2 {
		t.Errorf("countReachable = %d, want 2", n)
	}
}

// listen returns the address of a loopback listener whose connections
// serve runs on (then closes); with serve nil, of a port nothing listens
// on any more.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if serve == nil {
		_ = l.Close()
		return addr
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
				// Hold the connection until the prober gives up or reads.
				_ = c.SetReadDeadline(time.Now().Add(2 * probeTimeout))
				var b [1]byte
				_, _ = c.Read(b[:])
			}()
		}
	}()
	return addr
}

func TestRenewBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 50: time.Second} {
		for range 20 {
			if d := renewBackoff(n); d > want || d < want*4/5 {
				t.Fatalf("renewBackoff(%d) = %s, want %s less up to a fifth", n, d, want)
			}
		}
	}
	if w := electionWindow(defaultLeaseTTL); w != 11500*time.Millisecond {
		t.Fatalf("the default TTL rides out %s, want 11.5s", w)
	}
	if w := electionWindow(ElectionTTL); w < 10*time.Second {
		t.Fatalf("ElectionTTL rides out %s, less than 10 s", w)
	}
}
