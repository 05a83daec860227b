package script_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/brainrt/brain/provide/script"
)

// TestWorkersEndWithTheirRuntime: each goja runtime keeps a worker
// goroutine while it is idle; a Runtime that is no longer reachable must
// not leave them behind.
func TestWorkersEndWithTheirRuntime(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		r := newRuntime(t, script.Grants{}, &script.Options{MaxConcurrent: 3})
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				if _, err := r.Call(context.Background(), `(a) => a + 1`, []byte(`1`)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := runtime.NumGoroutine(); n <= before {
			t.Fatalf("%d goroutines with idle runtimes, %d before: the workers are not kept", n, before)
		}
	}()
	for i := 0; runtime.NumGoroutine() > before; i++ {
		if i == 2000 {
			t.Fatalf("%d goroutines remain after the Runtime was dropped, %d before", runtime.NumGoroutine(), before)
		}
		runtime.GC()
		runtime.Gosched()
	}
}
