package workers_test

import (
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/workers"
)

func TestSubmitRunsEveryJob(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	p := workers.New(func(n int) {
		mu.Lock()
		seen[n] = true
		mu.Unlock()
		wg.Done()
	}, time.Minute)
	const n = 500
	wg.Add(n)
	for i := range n {
		p.Submit(i)
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("ran %d distinct jobs, want %d", len(seen), n)
	}
}

// TestBlockedWorkerDoesNotBlockSubmit: a job that never returns occupies
// its worker; later jobs run on others.
func TestBlockedWorkerDoesNotBlockSubmit(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	done := make(chan int, 1)
	p := workers.New(func(n int) {
		if n == 0 {
			<-block
			return
		}
		done <- n
	}, time.Minute)
	p.Submit(0)
	p.Submit(1)
	select {
	case got := <-done:
		if got != 1 {
			t.Fatalf("got %d", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a blocked worker blocked the next job")
	}
}

func BenchmarkSubmit(b *testing.B) {
	done := make(chan struct{})
	p := workers.New(func(struct{}) { done <- struct{}{} }, time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		p.Submit(struct{}{})
		<-done
	}
}
