package settle

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"
)

// spell is a stretch of the process's life allocating at a steady rate.
type spell struct {
	until time.Duration // from the start
	rate  float64       // bytes a second
}

// fakeProcess allocates by a schedule of spells on the bubble's clock
// and records when Run released its memory.
type fakeProcess struct {
	start    time.Time
	spells   []spell
	mu       sync.Mutex
	releases []time.Duration
}

func (p *fakeProcess) allocated() uint64 {
	at := time.Since(p.start)
	var total float64
	from := time.Duration(0)
	for _, s := range p.spells {
		end := min(at, s.until)
		if end > from {
			total += s.rate * (end - from).Seconds()
		}
		from = s.until
		if at <= s.until {
			break
		}
	}
	return uint64(total)
}

func (p *fakeProcess) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releases = append(p.releases, time.Since(p.start))
}

// run runs Run on p's schedule for d of the bubble's time and returns
// when it released, from the start.
func run(t *testing.T, d time.Duration, spells ...spell) []time.Duration {
	t.Helper()
	var got []time.Duration
	synctest.Test(t, func(t *testing.T) {
		p := &fakeProcess{start: time.Now(), spells: spells}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, &Options{release: p.release, allocated: p.allocated})
		}()
		time.Sleep(d) // the bubble's clock: the ticks in between fire in order
		cancel()
		<-done
		got = p.releases
	})
	return got
}

const (
	busyRate  = 20 << 20 // 20 MiB/s: a node serving round trips
	quietRate = 8 << 10  // 8 KiB/s: idle connections' timers
)

func TestSettle(t *testing.T) {
	tests := []struct {
		name   string
		spells []spell
		want   []time.Duration
	}{
		{
			name:   "a busy spell, then quiet: one release, 15 s into the quiet",
			spells: []spell{{20 * time.Second, busyRate}, {time.Hour, quietRate}},
			want:   []time.Duration{35 * time.Second},
		},
		{
			name:   "quiet from the start: nothing to give back",
			spells: []spell{{time.Hour, quietRate}},
		},
		{
			name:   "busy throughout: never interrupted",
			spells: []spell{{time.Hour, busyRate}},
		},
		{
			name:   "quiet for less than 15 s between busy spells: no release until the last quiet",
			spells: []spell{{20 * time.Second, busyRate}, {30 * time.Second, quietRate}, {60 * time.Second, busyRate}, {time.Hour, quietRate}},
			want:   []time.Duration{75 * time.Second},
		},
		{
			name: "two quiet spells after two busy ones: a release for each",
			spells: []spell{
				{10 * time.Second, busyRate}, {30 * time.Second, quietRate}, // released at 25 s
				{40 * time.Second, busyRate}, {time.Hour, quietRate}, // quiet from 40 s: released at 55 s
			},
			want: []time.Duration{25 * time.Second, 55 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, 5*time.Minute, tt.spells...)
			if len(got) != len(tt.want) {
				t.Fatalf("released at %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("released at %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestReleaseIsNotBusy: what the release itself allocates (a collection,
// the scavenger's bookkeeping) does not count as the next busy spell.
func TestReleaseIsNotBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var extra uint64
		var releases int
		alloc := func() uint64 {
			mu.Lock()
			defer mu.Unlock()
			at := time.Since(start)
			n := extra + uint64(quietRate*at.Seconds())
			if at < 10*time.Second {
				n += uint64(busyRate * at.Seconds())
			} else {
				n += uint64(busyRate * 10)
			}
			return n
		}
		release := func() {
			mu.Lock()
			defer mu.Unlock()
			releases++
			extra += 64 << 20 // a big release's own allocations
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, &Options{release: release, allocated: alloc})
		}()
		time.Sleep(10 * time.Minute)
		cancel()
		<-done
		if releases != 1 {
			t.Fatalf("%d releases over ten quiet minutes after one busy spell, want 1", releases)
		}
	})
}

// TestRunEndsWithItsContext: Run returns once its context ends.
func TestRunEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, &Options{release: func() {}})
		}()
		synctest.Wait()
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return after its context ended")
		}
	})
}

// TestReleaseEmptiesPools: a release frees what waits in a sync.Pool
// unasked for — the embedded NATS server keeps a file block's 8 MiB
// cache in one — which survives a single collection as the pool's
// victim (it held 8 KiB a client at 1,000 clients, measured from
// outside).
func TestReleaseEmptiesPools(t *testing.T) {
	var freed weak.Pointer[byte]
	var pool sync.Pool
	func() {
		buf := make([]byte, 8<<20)
		freed = weak.Make(&buf[0])
		pool.Put(&buf) // from here on only the pool holds it
	}()
	release()
	if freed.Value() != nil {
		t.Fatal("a buffer left in a sync.Pool is still held after a release")
	}
	runtime.KeepAlive(&pool) // the pool lives on, as a server's do
}
