package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/natstest"
	"github.com/brainrt/brain/store"
)

// openClustered opens a store on url with R3, retrying while the cluster
// elects its JetStream leaders (bounded).
func openClustered(t testing.TB, url string) *store.Store {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := store.Open(ctx, &store.Options{URL: url, Replicas: 3, Timeout: 5 * time.Second})
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("open store on %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond) // polling a cluster that is electing leaders; not synchronisation
	}
}

func leases(t testing.TB, s *store.Store, node string, ttl time.Duration) *store.Leases {
	t.Helper()
	l, err := s.Leases(context.Background(), &store.LeaseOptions{Node: node, Addr: "http://" + node + ".test", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// eventually polls cond every 20 ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond) // polling a deadline-bounded condition
	}
}

func TestClusterLeases(t *testing.T) {
	urls := natstest.StartCluster(t, 3)
	stores := make([]*store.Store, 3)
	for i, u := range urls {
		stores[i] = openClustered(t, u)
	}
	const ttl = time.Second
	l1, l2, l3 := leases(t, stores[0], "node1", ttl), leases(t, stores[1], "node2", ttl), leases(t, stores[2], "node3", ttl)
	ctx := context.Background()

	t.Run("one holder at a time", func(t *testing.T) {
		x, err := l1.Acquire(ctx, "s-one")
		if err != nil {
			t.Fatal(err)
		}
		_, err = l2.Acquire(ctx, "s-one")
		var le *store.LeasedError
		if !errors.As(err, &le) || !errors.Is(err, store.ErrLeased) || le.Holder.Node != "node1" || le.Holder.Addr != "http://node1.test" {
			t.Fatalf("second acquire: %v, want LeasedError by node1", err)
		}
		h, ok, err := l3.Holder(ctx, "s-one")
		if err != nil || !ok || h.Node != "node1" {
			t.Fatalf("Holder = %+v %v %v", h, ok, err)
		}
		// Renewed past several TTLs, still held.
		time.Sleep(2 * ttl) // letting the renewal loop run: the behaviour under test is the passage of time
		if !x.Valid() {
			t.Fatalf("lease lost while renewed: %v", x.Err())
		}
		if _, err := l2.Acquire(ctx, "s-one"); !errors.Is(err, store.ErrLeased) {
			t.Fatalf("acquire after 2 TTLs of renewal: %v, want ErrLeased", err)
		}
		if err := x.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-x.Lost():
		default:
			t.Fatal("Lost not closed by Release")
		}
		if _, err := l2.Acquire(ctx, "s-one"); err != nil {
			t.Fatalf("acquire after release: %v", err)
		}
	})

	t.Run("an abandoned lease expires after the TTL", func(t *testing.T) {
		s4 := openClustered(t, urls[2])
		dead := leases(t, s4, "node4", ttl)
		x, err := dead.Acquire(ctx, "s-dead")
		if err != nil {
			t.Fatal(err)
		}
		store.Abandon(dead)
		start := time.Now()
		if _, err := l1.Acquire(ctx, "s-dead"); !errors.Is(err, store.ErrLeased) {
			t.Fatalf("acquire right after the holder died: %v, want ErrLeased", err)
		}
		eventually(t, 4*ttl, "the dead node's lease stops being valid", func() bool { return !x.Valid() })
		var took time.Duration
		eventually(t, 5*ttl, "another node takes the expired lease", func() bool {
			_, err := l1.Acquire(ctx, "s-dead")
			took = time.Since(start)
			return err == nil
		})
		if took < ttl*4/5 {
			t.Fatalf("taken after %s, before the TTL %s", took, ttl)
		}
		t.Logf("expired lease taken after %s (TTL %s)", took.Round(10*time.Millisecond), ttl)
	})

	t.Run("a lease taken over is lost by its old holder", func(t *testing.T) {
		x, err := l3.Acquire(ctx, "s-stolen")
		if err != nil {
			t.Fatal(err)
		}
		// The same node id restarted (a new process) takes its lease back.
		again := leases(t, openClustered(t, urls[0]), "node3", ttl)
		if _, err := again.Acquire(ctx, "s-stolen"); err != nil {
			t.Fatalf("restarted node re-acquiring its lease: %v", err)
		}
		select {
		case <-x.Lost():
		case <-time.After(3 * ttl):
			t.Fatal("old holder did not notice within 3 TTLs")
		}
		if !errors.Is(x.Err(), store.ErrLeaseLost) || x.Valid() {
			t.Fatalf("old lease: valid %v err %v", x.Valid(), x.Err())
		}
	})

	t.Run("a stale owner's append is refused", func(t *testing.T) {
		const id = "s-fenced"
		old, err := stores[0].Journal(id)
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			if err := old.Append(ev(seq, "w")); err != nil {
				t.Fatal(err)
			}
		}
		// The new owner, on another node, restores and continues.
		events, err := stores[1].Load(ctx, id)
		if err != nil || len(events) != 3 {
			t.Fatalf("load on the new owner: %d events, %v", len(events), err)
		}
		fresh, err := stores[1].Journal(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := fresh.Append(ev(4, "w")); err != nil {
			t.Fatal(err)
		}
		if err := old.Append(ev(4, "w")); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("stale owner's append: %v, want ErrConflict", err)
		}
		if err := fresh.Append(ev(5, "w")); err != nil {
			t.Fatalf("new owner after the refused write: %v", err)
		}
		events, err = stores[2].Load(ctx, id)
		if err != nil || len(events) != 5 {
			t.Fatalf("final log: %d events, %v", len(events), err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opts store.LeaseOptions
			want string
		}{
			{"no node id", store.LeaseOptions{}, "node id"},
			{"node id with a dot", store.LeaseOptions{Node: "a.b"}, "node id"},
			{"TTL too short", store.LeaseOptions{Node: "n", TTL: time.Millisecond}, "shorter than"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := stores[0].Leases(ctx, &tc.opts)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
			})
		}
		if _, err := l1.Acquire(ctx, "bad id"); !errors.Is(err, store.ErrInvalidSessionID) {
			t.Fatalf("bad session id: %v", err)
		}
	})
}
