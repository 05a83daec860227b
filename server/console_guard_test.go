package server

import (
	"fmt"
	"testing"
	"time"
)

// TestSignInLimiterRefills: after the burst, one attempt every signInEvery
// on a fake clock; the wait it reports is the time to the next one.
func TestSignInLimiterRefills(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newSignInLimiter(func() time.Time { return now })
	for i := range signInBurst {
		if ok, _ := l.allow("10.1.1.1:1"); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
	}
	ok, wait := l.allow("10.1.1.1:1")
	if ok || wait <= 0 || wait > signInEvery {
		t.Fatalf("over the burst: %v, wait %v", ok, wait)
	}
	now = now.Add(signInEvery / 2)
	if ok, wait := l.allow("10.1.1.1:1"); ok || wait > signInEvery/2+time.Millisecond {
		t.Fatalf("half a refill later: %v, wait %v", ok, wait)
	}
	now = now.Add(signInEvery)
	if ok, _ := l.allow("10.1.1.1:1"); !ok {
		t.Fatal("a refill later: refused")
	}
	if ok, _ := l.allow("10.1.1.1:1"); ok {
		t.Fatal("one refill gave two attempts")
	}
	if ok, _ := l.allow("[2001:db8::1]:1"); !ok {
		t.Fatal("another address refused")
	}
}

// TestSignInLimiterBounded: the table holds signInAddrs addresses; full of
// ones that have not refilled, a new address is refused (fail closed);
// once they have refilled they are forgotten and new addresses get in.
func TestSignInLimiterBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newSignInLimiter(func() time.Time { return now })
	for i := range signInAddrs {
		l.allow(fmt.Sprintf("10.%d.%d.1:1", i>>8, i&255))
	}
	if ok, _ := l.allow("192.0.2.1:1"); ok {
		t.Fatal("a new address got in while the table was full of limited ones")
	}
	if len(l.buckets) != signInAddrs {
		t.Fatalf("%d addresses kept", len(l.buckets))
	}
	now = now.Add(2 * signInEvery) // the one attempt each has refilled
	if ok, _ := l.allow("192.0.2.1:1"); !ok {
		t.Fatal("refused after the others refilled")
	}
	if len(l.buckets) != 1 {
		t.Fatalf("%d addresses kept after pruning, want 1", len(l.buckets))
	}
	// Addresses of one IPv6 /64 share a bucket.
	for i := range signInBurst {
		l.allow(fmt.Sprintf("[2001:db8:1:2::%x]:1", i+1))
	}
	if ok, _ := l.allow("[2001:db8:1:2:ffff::1]:1"); ok {
		t.Fatal("a /64 got more than the burst")
	}
}
