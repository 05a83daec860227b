package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/natstest"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// openOn opens an R3 store on a cluster's URLs, retrying while the
// cluster elects its JetStream leaders (bounded).
func openOn(t testing.TB, url string) *store.Store {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := store.Open(ctx, &store.Options{URL: url, Replicas: 3})
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("open store on %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond) // polling a cluster electing its leaders
	}
}

// holder is a journal that rides out what its lease outlives.
type holder interface {
	HoldWhile(func() bool)
}

// faultWriter appends to one session every few milliseconds, riding out what
// its lease outlives, and records the longest append and any failure.
type faultWriter struct {
	j       session.Journal
	seq     uint64
	done    atomic.Uint64 // appends acknowledged
	longest atomic.Int64  // nanoseconds
	err     atomic.Pointer[error]
}

func (w *faultWriter) run(stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	for {
		select {
		case <-stop:
			return
		default:
		}
		w.seq++
		start := time.Now()
		if err := w.j.Append(ev(w.seq, "w")); err != nil {
			err = fmt.Errorf("append %d after %s: %w", w.seq, time.Since(start).Round(time.Millisecond), err)
			w.err.Store(&err)
			return
		}
		if d := int64(time.Since(start)); d > w.longest.Load() {
			w.longest.Store(d)
		}
		w.done.Add(1)
		t := time.NewTimer(20 * time.Millisecond) // the pace of a session's events
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return
		}
	}
}

// TestStoreFaults runs three nats-server processes (R3) and three stores,
// one per brain node, each holding leases with the default TTL and
// appending to a session of its own:
//
//   - SIGKILL of the server leading the lease bucket: the election that
//     follows loses no lease and fails no append (each rides it out);
//     the test reports how long the bucket had no leader and the longest
//     append;
//   - SIGKILL of two servers: every store says, within 2 s, that it has
//     no quorum and how many servers it reaches; acquiring a lease and
//     appending fail at once with that; of the third: every store says
//     it reaches none; once the servers are back, the store answers again
//     and nothing acknowledged is lost.
func TestStoreFaults(t *testing.T) {
	pc := natstest.StartProcCluster(t, 3)
	if err := pc.WaitJetStream(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	stores := make([]*store.Store, 3)
	nodes := make([]*store.Leases, 3)
	for i := range stores {
		stores[i] = openOn(t, pc.URL())
		nodes[i] = leases(t, stores[i], fmt.Sprintf("node%d", i+1), 0) // the default TTL
	}
	if ttl := nodes[0].TTL(); ttl != 20*time.Second {
		t.Fatalf("default lease TTL %s, want 20s", ttl)
	}
	ctx := context.Background()
	var held []*store.Lease
	for i, l := range nodes {
		for k := range 10 {
			x, err := l.Acquire(ctx, fmt.Sprintf("s%d-%d", i, k))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, x)
		}
	}
	writers := make([]*faultWriter, 3)
	for i, st := range stores {
		id := fmt.Sprintf("w%d", i)
		j := journal(t, st, id)
		x := held[i*10] // the faultWriter's session is leased like the others
		j.(holder).HoldWhile(x.Valid)
		writers[i] = &faultWriter{j: j}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Add(1)
		go w.run(stop, &wg)
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters()
	checkWriters := func() {
		t.Helper()
		for i, w := range writers {
			if err := w.err.Load(); err != nil {
				t.Fatalf("faultWriter %d: %v", i, *err)
			}
		}
	}
	checkLeases := func() {
		t.Helper()
		for _, x := range held {
			if !x.Valid() {
				t.Fatalf("lease of %s lost: %v", x.Session(), x.Err())
			}
		}
	}

	t.Run("an election of the lease bucket loses nothing", func(t *testing.T) {
		leader, err := pc.StreamLeader(ctx, "KV_brain_session_leases")
		if err != nil {
			t.Fatal(err)
		}
		// The killed server leads the events stream too: the appends ride
		// the same election out.
		if err := pc.MoveLeader(ctx, "BRAIN_EVENTS", leader, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		pc.Server(leader).Kill()
		killed := time.Now()
		var elected time.Duration
		// Until every lease has been renewed after the kill: the election
		// is over and the leases rode it out.
		deadline := killed.Add(store.ElectionTTL)
		for {
			checkWriters()
			checkLeases()
			if elected == 0 {
				if l, err := pc.StreamLeader(ctx, "KV_brain_session_leases"); err == nil && l != leader {
					elected = time.Since(killed)
				}
			}
			renewed := 0
			for _, x := range held {
				if store.LeaseValidUntil(x).After(killed.Add(time.Second)) {
					renewed++
				}
			}
			if renewed == len(held) && elected > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d leases renewed %s after the kill (new leader after %s)", renewed, len(held), time.Since(killed), elected)
			}
			time.Sleep(50 * time.Millisecond) // polling leases renewed in the background
		}
		// Every writer has its append that waited out the election
		// acknowledged, and goes on.
		var marks []uint64
		for _, w := range writers {
			marks = append(marks, w.done.Load())
		}
		eventually(t, 30*time.Second, "every writer goes on", func() bool {
			checkWriters()
			for i, w := range writers {
				if w.done.Load() < marks[i]+2 {
					return false
				}
			}
			return true
		})
		longest := time.Duration(0)
		for _, w := range writers {
			longest = max(longest, time.Duration(w.longest.Load()))
		}
		t.Logf("SIGKILL of %s, the lease bucket's leader: a new leader after %s, every lease renewed after %s; no lease lost, no append failed, the longest append %s",
			leader, elected.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), longest.Round(time.Millisecond))
		if err := pc.Server(leader).Start(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("quorum loss is said precisely, and nothing is lost", func(t *testing.T) {
		// The restarted server is back in the cluster: the stores answer.
		eventually(t, 60*time.Second, "every store answers", func() bool {
			for _, st := range stores {
				if st.Health().State != store.HealthOK {
					return false
				}
			}
			return true
		})
		stopWriters()
		checkWriters()
		written := make([]uint64, 3)
		for i, w := range writers {
			written[i] = w.done.Load()
		}
		// Two servers go: the survivor has no quorum.
		var gone []*natstest.Server
		for _, s := range pc.Servers[1:] {
			s.Kill()
			gone = append(gone, s)
		}
		killed := time.Now()
		// Within 2 s of the kill, every store says it.
		eventually(t, 2*time.Second-time.Since(killed), "every store says it has no quorum", func() bool {
			for _, st := range stores {
				if st.Health().State != store.HealthNoQuorum {
					return false
				}
			}
			return true
		})
		for i, st := range stores {
			if h := st.Health(); h.Ready || h.Message != "the session store has no quorum: 1 of 3 NATS servers reachable" || h.Reachable != 1 || h.Servers != 3 {
				t.Fatalf("store %d: %+v", i, h)
			}
		}
		t.Logf("every store said %q within %s of the kill", stores[0].Health().Message, time.Since(killed).Round(time.Millisecond))
		start := time.Now()
		_, err := nodes[0].Acquire(ctx, "s-new")
		var ue *store.UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, store.ErrUnavailable) || !strings.Contains(ue.StoreUnavailable(), "no quorum: 1 of 3") {
			t.Fatalf("acquire without a quorum: %v", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("acquire without a quorum failed after %s, not at once", took)
		}
		if err := writers[0].j.Append(ev(written[0]+1, "w")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("append without a quorum: %v", err)
		}

		// The last one goes too: nothing is reachable.
		pc.Servers[0].Kill()
		gone = append(gone, pc.Servers[0])
		killed = time.Now()
		eventually(t, 2*time.Second-time.Since(killed), "every store says it reaches no server", func() bool {
			for _, st := range stores {
				if st.Health().State != store.HealthUnreachable {
					return false
				}
			}
			return true
		})
		if h := stores[1].Health(); h.Ready || h.Message != "the session store cannot be reached: none of 3 NATS servers answers" {
			t.Fatalf("store 1: %+v", h)
		}
		if _, err := nodes[1].Acquire(ctx, "s-new"); !errors.As(err, &ue) || !strings.Contains(ue.StoreUnavailable(), "cannot be reached") {
			t.Fatalf("acquire with no server: %v", err)
		}

		for _, s := range gone {
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
		}
		back := time.Now()
		eventually(t, 60*time.Second, "every store answers again", func() bool {
			for _, st := range stores {
				if st.Health().State != store.HealthOK {
					return false
				}
			}
			return true
		})
		t.Logf("the stores answered again %s after the servers came back", time.Since(back).Round(time.Millisecond))
		// Nothing acknowledged is lost. The append refused without a quorum
		// may be there too (the survivor may have had it in its log,
		// uncommitted), and the journal publishes it again before its next
		// event either way.
		for i, st := range stores {
			var events []session.Event
			eventually(t, 30*time.Second, "the log loads", func() bool {
				var err error
				events, err = st.Load(ctx, fmt.Sprintf("w%d", i))
				return err == nil
			})
			if n := uint64(len(events)); n != written[i] && (i != 0 || n != written[i]+1) {
				t.Fatalf("session w%d: %d events after the recovery, %d acknowledged", i, len(events), written[i])
			}
			checkContiguous(t, events, 1)
		}
		if err := writers[0].j.Append(ev(written[0]+2, "w")); err != nil {
			t.Fatalf("append after the recovery: %v", err)
		}
		if events := load(t, stores[1], "w0"); uint64(len(events)) != written[0]+2 {
			t.Fatalf("session w0: %d events, want %d", len(events), written[0]+2)
		}
		if _, err := nodes[0].Acquire(ctx, "s-new"); err != nil {
			t.Fatalf("acquire after the recovery: %v", err)
		}
	})
}
