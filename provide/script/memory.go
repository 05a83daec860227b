package script

import (
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// heapInterval is how often the watchdog samples the heap while calls
// run. A string that doubles in a loop grows by about 10 MiB a
// millisecond here, so the overshoot past a budget is a few tens of MiB.
const heapInterval = 2 * time.Millisecond

// ceilingSlack is how far past the collector's heap goal (or past a call's
// own threshold, if higher) the heap may be before a call is stopped
// without waiting for the collection it asked for: ceilingBudgets of its
// budget, and at least minCeilingSlack. The Go pacer keeps ordinary
// allocation within about a tenth of its goal; a heap this far past it is
// a script allocating faster than any collection can finish (a string
// doubling while a forced GC takes 300ms on a loaded machine reached 20
// times its budget before this existed).
const (
	ceilingBudgets  = 4
	minCeilingSlack = 64 << 20
)

const (
	metricObjects = "/memory/classes/heap/objects:bytes" // live and not yet swept
	metricLive    = "/gc/heap/live:bytes"                // marked live by the last GC
	metricGoal    = "/gc/heap/goal:bytes"                // the collector's target for this cycle
)

// heap is the process's one watchdog: the heap it measures is the
// process's, so one sampler and at most one forced GC at a time serve
// every call of every Runtime.
var heap = &heapMonitor{watches: make(map[*memWatch]struct{}), read: readHeap, collect: runtime.GC}

// heapMonitor watches the heap while calls run. goja has no memory
// accounting, and Go none per goroutine, so a call's use is estimated as
// the growth of the process's live heap since it started:
//
//   - Every heapInterval it reads the bytes held by heap objects, a cheap
//     figure that counts garbage too.
//   - When that passes a call's threshold (its starting point plus its
//     budget), it starts a GC, which leaves only live objects, and once
//     the GC is over charges each call the growth of the live heap since
//     its start. It goes on sampling while the GC runs.
//   - A call over budget is stopped; the others get a new threshold one
//     budget above the post-GC heap, so a forced GC happens at most once
//     per budget of allocation.
//   - A heap far past the collector's goal (ceilingSlack) stops a call at
//     once, without waiting for a GC: on a loaded machine a GC can take
//     hundreds of milliseconds, in which a hostile script can allocate a
//     gigabyte.
//
// Under concurrency this is imprecise both ways: allocations made at the
// same time by other calls or other code are charged to every running
// call, and garbage present when a call starts can let it exceed its
// budget by that much. See docs/handle-js.md.
type heapMonitor struct {
	mu      sync.Mutex
	watches map[*memWatch]struct{}
	running bool
	read    func() heapSample // readHeap, but for tests
	collect func()            // runtime.GC, but for tests
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
	s := m.read()
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
	var gc <-chan heapSample // the forced GC under way, if any
	for range t.C {
		m.mu.Lock()
		if len(m.watches) == 0 {
			m.running = false
			m.mu.Unlock()
			return // a GC under way ends on its own; its result is dropped
		}
		ws = ws[:0]
		for w := range m.watches {
			ws = append(ws, w)
		}
		m.mu.Unlock()
		gc = m.check(ws, gc)
	}
}

// check looks at the heap once for the watches ws. gc is the forced GC
// under way, if any; check returns the one under way after it.
func (m *heapMonitor) check(ws []*memWatch, gc <-chan heapSample) <-chan heapSample {
	s := m.read()
	for _, w := range ws {
		if !w.breached && s.objects > w.ceiling(s.goal) {
			w.breached = true
			w.breach(s.objects - w.base)
		}
	}
	if gc != nil {
		select {
		case after := <-gc:
			m.judge(ws, after)
			return nil
		default:
			return gc
		}
	}
	for _, w := range ws {
		if !w.breached && s.objects > w.threshold {
			return m.startGC()
		}
	}
	return nil
}

// startGC runs a GC on a goroutine of its own, which sends the heap after
// it: the monitor goes on sampling meanwhile.
func (m *heapMonitor) startGC() <-chan heapSample {
	done := make(chan heapSample, 1)
	go func() {
		m.collect()
		done <- m.read()
	}()
	return done
}

// judge charges each call the growth of the live heap a GC measured.
func (m *heapMonitor) judge(ws []*memWatch, s heapSample) {
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

// ceiling is the heap past which the call is stopped without a GC: the
// collector's goal (or the call's threshold, if higher) plus its slack. A
// goal that is not a number of bytes a heap could reach (GOGC=off without
// a memory limit) leaves only the threshold.
func (w *memWatch) ceiling(goal int64) int64 {
	slack := max(ceilingBudgets*w.budget, minCeilingSlack)
	if goal < 0 || goal > math.MaxInt64/4 {
		goal = 0
	}
	return max(goal, w.threshold) + slack
}

type heapSample struct{ objects, live, goal int64 }

func readHeap() heapSample {
	samples := []metrics.Sample{{Name: metricObjects}, {Name: metricLive}, {Name: metricGoal}}
	metrics.Read(samples)
	goal := samples[2].Value.Uint64()
	if goal > math.MaxInt64 {
		goal = math.MaxInt64
	}
	return heapSample{objects: int64(samples[0].Value.Uint64()), live: int64(samples[1].Value.Uint64()), goal: int64(goal)}
}
