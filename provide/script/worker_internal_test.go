package script

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
)

// TestWorkersEndWithTheirRuntime: each goja runtime keeps a worker
// goroutine while it is idle; a Runtime that is no longer reachable must
// not leave them behind. Its idle calls are kept here (they do not keep
// the Runtime reachable) to see their workers told to end.
func TestWorkersEndWithTheirRuntime(t *testing.T) {
	var idle []*call
	func() {
		r, err := New(Grants{}, &Options{MaxConcurrent: 3})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				if _, err := r.Call(context.Background(), `(a) => a + 1`, []byte(`1`)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for len(r.idle) > 0 {
			idle = append(idle, <-r.idle)
		}
		if len(idle) == 0 {
			t.Fatal("no runtime was kept idle")
		}
		for _, c := range idle {
			if retired(c) {
				t.Fatal("an idle runtime's worker was told to end while its Runtime is in use")
			}
			r.idle <- c
		}
	}()
	for i := 0; ; i++ {
		n := 0
		for _, c := range idle {
			if retired(c) {
				n++
			}
		}
		if n == len(idle) {
			return
		}
		if i == 1000 {
			t.Fatalf("%d of %d idle workers still running after their Runtime was dropped", len(idle)-n, len(idle))
		}
		runtime.GC()
		runtime.Gosched()
	}
}

// retired reports whether c's worker was told to end (its jobs closed).
func retired(c *call) bool {
	select {
	case _, ok := <-c.jobs:
		return !ok
	default:
		return false
	}
}

// TestDeepCallFreesItsStack: a Call that grew its worker's stack far
// (recursion through built-ins) does not leave that stack to the idle
// runtime: the worker is replaced, and the stack freed, as the Call ends.
func TestDeepCallFreesItsStack(t *testing.T) {
	r, err := New(Grants{}, &Options{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.Call(ctx, `() => 1`, nil); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	before := stackBytes()
	// The recursion grows the stack by about 16 MiB; the loop makes sure
	// that the Call outlasts freshStackAfter on a fast machine too.
	out, err := r.Call(ctx, `() => { const f = (n) => n ? [n - 1].map(f)[0] + 1 : 0; const t = Date.now(); while (Date.now() - t < 5) {} return f(4500) }`, nil)
	if err != nil || string(out) != "4500" {
		t.Fatalf("deep call = %s, %v", out, err)
	}
	// The replaced worker ends as the Call returns, and the runtime keeps
	// the large stack it leaves for reuse until the next collection frees
	// it. One collection, no more: a collection may also halve the stack
	// of a goroutine that is still alive (16 → 8 MiB), so a worker that
	// kept its stack must still fail the bound, which several would not
	// ensure.
	for range 200 {
		runtime.Gosched() // the old worker is runnable: let it end
	}
	runtime.GC()
	if now := stackBytes(); now >= before+4<<20 {
		t.Fatalf("goroutine stacks hold %d MiB after the deep call and a collection, %d MiB before", now>>20, before>>20)
	}
	// The runtime still serves.
	if out, err := r.Call(ctx, `(a) => a * 2`, []byte(`21`)); err != nil || string(out) != "42" {
		t.Fatalf("next call = %s, %v", out, err)
	}
}

func stackBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
