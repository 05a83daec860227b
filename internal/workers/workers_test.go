package workers_test

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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

// goroutineID is the running goroutine's number, from its stack's first
// line ("goroutine 42 [running]:"): which worker ran a job.
func goroutineID() string {
	var b [64]byte
	f := strings.Fields(string(b[:runtime.Stack(b[:], false)]))
	return f[1]
}

// TestMostRecentlyIdleWorkerTakesTheNextJob: with three idle workers, the
// next job runs on the one that finished last, and a job handed to a
// worker that has just gone idle again runs on it too (a stack, not a
// round-robin queue).
func TestMostRecentlyIdleWorkerTakesTheNextJob(t *testing.T) {
	type job struct {
		release chan struct{}
		ran     chan string
	}
	p := workers.New(func(j job) {
		if j.release != nil {
			<-j.release
		}
		j.ran <- goroutineID()
	}, time.Minute)
	jobs := make([]job, 3)
	for i := range jobs {
		jobs[i] = job{release: make(chan struct{}), ran: make(chan string, 1)}
		p.Submit(jobs[i]) // each blocks: three workers
	}
	var last string
	for i, j := range jobs {
		close(j.release)
		last = <-j.ran
		for deadline := time.Now().Add(10 * time.Second); p.Idle() != i+1; {
			if time.Now().After(deadline) {
				t.Fatalf("%d workers idle, want %d", p.Idle(), i+1)
			}
			runtime.Gosched() // the worker is between sending its result and going idle
		}
	}
	for range 5 {
		next := job{ran: make(chan string, 1)}
		p.Submit(next)
		if got := <-next.ran; got != last {
			t.Fatalf("the next job ran on goroutine %s, want %s (the worker idle last)", got, last)
		}
		for p.Idle() != 3 {
			runtime.Gosched()
		}
	}
}

// TestIdleWorkersExit: a worker idle for the pool's idle time exits, and
// the pool starts a new one for the next job.
func TestIdleWorkersExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{}, 3)
		p := workers.New(func(struct{}) { done <- struct{}{} }, time.Second)
		for range 3 {
			p.Submit(struct{}{})
		}
		for range 3 {
			<-done
		}
		synctest.Wait()
		if got := p.Idle(); got == 0 || got > 3 {
			t.Fatalf("%d idle workers after three jobs, want 1 to 3", got)
		}
		time.Sleep(time.Second + time.Millisecond) // the bubble's clock: every worker's idle time passes
		synctest.Wait()
		if got := p.Idle(); got != 0 {
			t.Fatalf("%d idle workers after their idle time, want none", got)
		}
		p.Submit(struct{}{})
		<-done
		time.Sleep(2 * time.Second) // the new worker's idle time passes too: the bubble ends with no goroutine
	})
}
