package script

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// heapInterval is how often the watchdog samples the heap while calls
// run. A string that doubles in a loop grows by about 10 MiB a
// millisecond here, so the overshoot past a budget is a few tens of MiB.
const heapInterval = 2 * time.Millisecond

const (
	metricObjects = "/memory/classes/heap/objects:bytes" // live and not yet swept
	metricLive    = "/gc/heap/live:bytes"                // marked live by the last GC
)

// heap is the process's one watchdog: the heap it measures is the
// process's, so one sampler and at most one forced GC at a time serve
// every call of every Runtime.
var heap = &heapMonitor{watches: make(map[*memWatch]struct{})}

// heapMonitor watches the heap while calls run. goja has no memory
// accounting, and Go none per goroutine, so a call's use is estimated as
// the growth of the process's live heap since it started:
//
//   - Every heapInterval it reads the bytes held by heap objects, a cheap
//     figure that counts garbage too.
//   - When that passes a call's threshold (its starting point plus its
//     budget), it runs a GC, which leaves only live objects, and charges
//     each call the growth of the live heap since its start.
//   - A call over budget is stopped; the others get a new threshold one
//     budget above the post-GC heap, so a forced GC happens at most once
//     per budget of allocation.
//
// Under concurrency this is imprecise both ways: allocations made at the
// same time by other calls or other code are charged to every running
// call, and garbage present when a call starts can let it exceed its
// budget by that much. See docs/handle-js.md.
type heapMonitor struct {
	mu      sync.Mutex
	watches map[*memWatch]struct{}
	running bool
}

type memWatch struct {
	budget    int64
	base      int64       // live heap at the last GC before the call
	threshold int64       // heap objects bytes that trigger a closer look; monitor goroutine only after start
	breach    func(int64) // called once, with the growth, when over budget
	breached  bool
}

// watch starts watching a call with the given budget. stop must be called
// when the call's script has ended.
func (m *heapMonitor) watch(budget int64, breach func(used int64)) (stop func()) {
	s := readHeap()
	w := &memWatch{budget: budget, base: min(s.live, s.objects), threshold: s.objects + budget, breach: breach}
	m.mu.Lock()
	m.watches[w] = struct{}{}
	if !m.running {
		m.running = true
		go m.loop()
	}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.watches, w)
		m.mu.Unlock()
	}
}

func (m *heapMonitor) loop() {
	t := time.NewTicker(heapInterval)
	defer t.Stop()
	var ws []*memWatch
	for range t.C {
		m.mu.Lock()
		if len(m.watches) == 0 {
			m.running = false
			m.mu.Unlock()
			return
		}
		ws = ws[:0]
		for w := range m.watches {
			ws = append(ws, w)
		}
		m.mu.Unlock()
		m.check(ws)
	}
}

// check looks at the heap once for the watches ws.
func (m *heapMonitor) check(ws []*memWatch) {
	s := readHeap()
	suspect := false
	for _, w := range ws {
		if !w.breached && s.objects > w.threshold {
			suspect = true
			break
		}
	}
	if !suspect {
		return
	}
	runtime.GC()
	s = readHeap()
	for _, w := range ws {
		if w.breached {
			continue
		}
		// A live heap below the call's starting point means garbage
		// counted at the start (another call's, freed since) has been
		// collected: the call's growth is measured from here on, or that
		// garbage would let it grow past its budget by as much.
		w.base = min(w.base, s.live)
		if used := s.live - w.base; used > w.budget {
			w.breached = true
			w.breach(used)
			continue
		}
		w.threshold = s.objects + w.budget
	}
}

type heapSample struct{ objects, live int64 }

func readHeap() heapSample {
	samples := []metrics.Sample{{Name: metricObjects}, {Name: metricLive}}
	metrics.Read(samples)
	return heapSample{objects: int64(samples[0].Value.Uint64()), live: int64(samples[1].Value.Uint64())}
}
