// Package workers runs jobs on reused goroutines.
//
// Why: a call that runs off its caller's goroutine (so that a handler which
// ignores its context cannot hold the caller past a timeout) pays, on a
// fresh goroutine, for growing its stack again — JSON and schema validation
// need more than the initial 8 KiB — and for the scheduler's wake-up. An
// idle worker already has its stack; handing it the job costs a channel
// send and no allocation.
//
// Why the most recently idle worker takes the next job (a stack, not a
// queue): during a garbage collection every goroutine pays for its first
// allocation with at least 64 KiB of marking (the runtime's minimum
// assist), whatever it allocates. Jobs handed round-robin over many idle
// workers meet a fresh worker each time and each pays that minimum; jobs
// handed to the last worker that finished land on one that has paid
// already. The workers at the bottom of the stack are the ones left idle,
// and they exit (docs/RATIONALE.md, "Why call runners are shared and
// reused last-in first-out").
package workers

import (
	"slices"
	"sync"
	"time"
)

// Pool runs each submitted job on an idle worker, the most recently idle
// one first, or on a new one when none is idle. A worker that has been
// idle for the pool's idle time exits. The zero value is not usable: use
// New.
type Pool[T any] struct {
	run  func(T)
	idle time.Duration
	mu   sync.Mutex
	free []*worker[T] // idle workers, the most recently idle last
}

// worker is one goroutine of a pool: a job handed to it arrives on jobs.
type worker[T any] struct {
	jobs chan T // buffered: a hand-over never blocks
}

// New returns a pool running run on each job.
func New[T any](run func(T), idle time.Duration) *Pool[T] {
	return &Pool[T]{run: run, idle: idle}
}

// Submit runs run(job) on a worker goroutine and returns at once.
func (p *Pool[T]) Submit(job T) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		w := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		w.jobs <- job
		return
	}
	p.mu.Unlock()
	go p.loop(&worker[T]{jobs: make(chan T, 1)}, job)
}

func (p *Pool[T]) loop(w *worker[T], job T) {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		p.run(job)
		var zero T
		job = zero // nothing of the last job is kept while idle
		p.mu.Lock()
		p.free = append(p.free, w)
		p.mu.Unlock()
		t.Reset(p.idle)
		select {
		case job = <-w.jobs:
		case <-t.C:
			if p.leave(w) {
				return
			}
			job = <-w.jobs // taken off the list just now: its job is on the way
		}
	}
}

// leave takes an idle worker off the free list; false when a Submit has
// taken it already (and is handing it a job).
func (p *Pool[T]) leave(w *worker[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.free, w)
	if i < 0 {
		return false
	}
	p.free = slices.Delete(p.free, i, i+1)
	return true
}

// Idle returns the number of idle workers.
func (p *Pool[T]) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}
