package script

import (
	"context"
	"runtime"
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
