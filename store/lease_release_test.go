package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// internalLeases is node n1's leases (a TTL of a minute: the renewal loop
// leaves them to the test) on an embedded store of the test's own, and a
// context bounding the test.
func internalLeases(t *testing.T) (*Leases, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	l, err := openInternal(t).Leases(ctx, &LeaseOptions{Node: "n1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, ctx
}

// TestReleaseAfterALateRenewal: a renewal in flight as the release begins
// lands after the release read the lease's revision, so the release's
// delete at that revision is refused. The entry is still this node's
// (its value names this run): the release deletes it at its new revision
// instead of leaving it to expire — the next owner would wait out the TTL
// (a fresh-clone run's TestServeClusterSIGKILL: "node b's lease expired
// instead of being released on SIGTERM").
func TestReleaseAfterALateRenewal(t *testing.T) {
	l, ctx := internalLeases(t)
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

// inProcessKV is a lease bucket whose next Deletes and Updates are
// answered as a replicated stream answers an update of a key while another
// update of it is being applied (10164, as nats.go wraps it), changing
// nothing.
type inProcessKV struct {
	jetstream.KeyValue
	deletes, updates int // calls answered so, still to come
}

func errInProcess() error {
	apiErr := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
	return fmt.Errorf("%w: %w", apiErr, jetstream.ErrKeyRevisionMismatch)
}

func (kv *inProcessKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if kv.deletes > 0 {
		kv.deletes--
		return errInProcess()
	}
	return kv.KeyValue.Delete(ctx, key, opts...)
}

func (kv *inProcessKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if kv.updates > 0 {
		kv.updates--
		return 0, errInProcess()
	}
	return kv.KeyValue.Update(ctx, key, value, rev)
}

// TestRenewalWhileAnUpdateIsInProcess: a renewal told "wrong last
// sequence" because another update of the entry is being applied (which
// nats-server says for a moment after that update's acknowledgement, too)
// is sent again at once and renews: it was a failed renewal, and a test
// that renews right after an update failed on it in a loaded run.
func TestRenewalWhileAnUpdateIsInProcess(t *testing.T) {
	l, ctx := internalLeases(t)
	x, err := l.Acquire(ctx, "s-renew-busy")
	if err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	before := x.rev
	x.mu.Unlock()
	l.kv = &inProcessKV{KeyValue: l.kv, updates: 3}
	x.renew()
	x.mu.Lock()
	after, lastErr, lost := x.rev, x.lastErr, x.err
	x.mu.Unlock()
	if lost != nil || lastErr != nil || after <= before {
		t.Fatalf("renewal: revision %d -> %d, last error %v, lost %v; want renewed", before, after, lastErr, lost)
	}
}

// TestReleaseWhileAnUpdateIsInProcess: a release whose delete is told
// "wrong last sequence" because another update of the entry (this node's
// renewal in flight) is being applied tries again and deletes the entry —
// it failed, and the lease stayed held until it expired (a loaded run of
// TestServeClusterFaults: "after the stop 1 leases are still held").
func TestReleaseWhileAnUpdateIsInProcess(t *testing.T) {
	l, ctx := internalLeases(t)
	x, err := l.Acquire(ctx, "s-busy")
	if err != nil {
		t.Fatal(err)
	}
	l.kv = &inProcessKV{KeyValue: l.kv, deletes: 2}
	if err := x.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := l.readLease(ctx, "s-busy"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after the release the lease entry reads %v, want none", err)
	}
}
