package script

import (
	"math"
	"sync"
	"testing"
)

const mib = 1 << 20

// scriptedHeap is a heap whose samples the test sets, with a GC that
// blocks until the test lets it end: the slow GC of a loaded machine.
type scriptedHeap struct {
	mu      sync.Mutex
	now     heapSample
	gcStart chan struct{}
	gcEnd   chan heapSample
}

func (h *scriptedHeap) set(f func(*heapSample)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.now)
}

func (h *scriptedHeap) read() heapSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func newScriptedMonitor(h *scriptedHeap) *heapMonitor {
	h.gcStart, h.gcEnd = make(chan struct{}, 1), make(chan heapSample)
	m := &heapMonitor{watches: map[*memWatch]struct{}{}, read: h.read}
	m.collect = func() {
		h.gcStart <- struct{}{}
		after := <-h.gcEnd // the heap as the GC leaves it, read by startGC's goroutine
		h.set(func(s *heapSample) { *s = after })
	}
	return m
}

// watchOf is a watch with a budget, started on the scripted heap; it
// records the growth it was stopped for.
func watchOf(h *scriptedHeap, budget int64, used *int64) *memWatch {
	now := h.read()
	return &memWatch{budget: budget, base: min(now.live, now.objects), threshold: now.objects + budget,
		breach: func(u int64) { *used = u }}
}

// ended waits for the GC under way to end and returns a channel holding
// its result, as check finds it then.
func ended(gc <-chan heapSample) <-chan heapSample {
	c := make(chan heapSample, 1)
	c <- <-gc
	return c
}

// TestWatchdogSamplesDuringGC: the forced GC runs off the monitor's
// goroutine, so a script that allocates while it takes long is stopped
// at the next sample once the heap is far past the collector's goal,
// without waiting for the GC (a string doubling once reached 1.5 GiB on a
// 16 MiB budget while the monitor sat in a 365 ms runtime.GC).
func TestWatchdogSamplesDuringGC(t *testing.T) {
	h := &scriptedHeap{now: heapSample{objects: 20 * mib, live: 10 * mib, goal: 24 * mib}}
	m := newScriptedMonitor(h)
	var used int64 = -1
	w := watchOf(h, 16*mib, &used)
	ws := []*memWatch{w}

	h.set(func(s *heapSample) { s.objects = 30 * mib }) // under the threshold (36)
	if gc := m.check(ws, nil); gc != nil {
		t.Fatal("a GC was started under the threshold")
	}
	h.set(func(s *heapSample) { s.objects = 40 * mib })
	gc := m.check(ws, nil)
	if gc == nil {
		t.Fatal("no GC was started past the threshold")
	}
	<-h.gcStart
	h.set(func(s *heapSample) { s.objects = 90 * mib }) // past the threshold, under the ceiling (36 + 64)
	if gc = m.check(ws, gc); gc == nil || w.breached {
		t.Fatalf("at 90 MiB, under the ceiling: gc %v, breached %v", gc, w.breached)
	}
	h.set(func(s *heapSample) { s.objects = 120 * mib }) // the script goes on while the GC runs
	if gc = m.check(ws, gc); !w.breached || used != 110*mib {
		t.Fatalf("at 120 MiB during the GC: breached %v, used %d MiB; want stopped for 110 MiB", w.breached, used>>20)
	}
	if gc == nil {
		t.Fatal("the GC under way was forgotten")
	}
	h.gcEnd <- heapSample{objects: 60 * mib, live: 55 * mib, goal: 110 * mib}
	calls := 0
	w.breach = func(int64) { calls++ }
	if gc = m.check(ws, ended(gc)); gc != nil {
		t.Fatal("the GC's result was not taken")
	}
	if calls != 0 {
		t.Fatalf("a stopped call was stopped %d times more", calls)
	}
}

// TestWatchdogJudgesAfterGC: a GC's result charges each call its live
// growth: one over budget is stopped, one under it gets a new threshold
// one budget above the heap the GC left; a heap past the threshold but
// under the ceiling waits for the GC.
func TestWatchdogJudgesAfterGC(t *testing.T) {
	h := &scriptedHeap{now: heapSample{objects: 20 * mib, live: 10 * mib, goal: 40 * mib}}
	m := newScriptedMonitor(h)
	var usedBig, usedSmall int64 = -1, -1
	big := watchOf(h, 16*mib, &usedBig)
	small := watchOf(h, 64*mib, &usedSmall)
	ws := []*memWatch{big, small}

	h.set(func(s *heapSample) { s.objects = 50 * mib })
	gc := m.check(ws, nil)
	if gc == nil {
		t.Fatal("no GC past the smaller threshold")
	}
	<-h.gcStart
	h.gcEnd <- heapSample{objects: 45 * mib, live: 40 * mib, goal: 80 * mib}
	if gc = m.check(ws, ended(gc)); gc != nil {
		t.Fatal("the GC's result was not taken")
	}
	if !big.breached || usedBig != 30*mib {
		t.Errorf("the 16 MiB call grew by 30 MiB: breached %v, used %d MiB", big.breached, usedBig>>20)
	}
	if small.breached || small.threshold != 45*mib+64*mib {
		t.Errorf("the 64 MiB call: breached %v, threshold %d MiB; want 109", small.breached, small.threshold>>20)
	}
}

// TestWatchdogCeiling: the ceiling is the goal (or the call's threshold,
// if higher) plus four budgets, at least 64 MiB; a goal no heap could
// reach (GOGC=off without a limit) leaves the threshold.
func TestWatchdogCeiling(t *testing.T) {
	w := &memWatch{budget: 128 * mib, threshold: 200 * mib}
	for _, tc := range []struct {
		goal, want int64
	}{
		{goal: 100 * mib, want: 200*mib + 512*mib},
		{goal: 300 * mib, want: 300*mib + 512*mib},
		{goal: math.MaxInt64, want: 200*mib + 512*mib},
		{goal: -1, want: 200*mib + 512*mib},
	} {
		if got := w.ceiling(tc.goal); got != tc.want {
			t.Errorf("goal %d: ceiling %d MiB, want %d", tc.goal, got>>20, tc.want>>20)
		}
	}
	small := &memWatch{budget: 4 * mib, threshold: 10 * mib}
	if got := small.ceiling(8 * mib); got != 10*mib+64*mib {
		t.Errorf("a 4 MiB budget's ceiling is %d MiB, want 74", got>>20)
	}
}
