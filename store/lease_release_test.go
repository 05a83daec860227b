package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestReleaseAfterALateRenewal: a renewal in flight as the release begins
// lands after the release read the lease's revision, so the release's
// delete at that revision is refused. The entry is still this node's
// (its value names this run): the release deletes it at its new revision
// instead of leaving it to expire — the next owner would wait out the TTL
// (a fresh-clone run's TestServeClusterSIGKILL: "node b's lease expired
// instead of being released on SIGTERM").
func TestReleaseAfterALateRenewal(t *testing.T) {
	s := openInternal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := s.Leases(ctx, &LeaseOptions{Node: "n1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	x, err := l.Acquire(ctx, "s-late")
	if err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	rev := x.rev
	x.mu.Unlock()
	// The renewal that landed: this run's value, a new revision the lease
	// never recorded.
	if _, err := l.kv.Update(ctx, "s-late", l.value, rev); err != nil {
		t.Fatal(err)
	}
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if e, err := l.kv.Get(ctx, "s-late"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after the release the entry is still there (%v, %v): it would expire instead", e, err)
	}

	// Taken by another run of the node since: left alone.
	y, err := l.Acquire(ctx, "s-taken")
	if err != nil {
		t.Fatal(err)
	}
	y.mu.Lock()
	rev = y.rev
	y.mu.Unlock()
	other := []byte(`{"node":"n1","run":"another"}`)
	if _, err := l.kv.Update(ctx, "s-taken", other, rev); err != nil {
		t.Fatal(err)
	}
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if e, err := l.kv.Get(ctx, "s-taken"); err != nil || string(e.Value()) != string(other) {
		t.Fatalf("the other run's entry: %v, %v; want it kept", e, err)
	}
}
