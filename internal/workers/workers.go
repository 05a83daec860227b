// Package workers runs jobs on reused goroutines.
//
// Why: a call that runs off its caller's goroutine (so that a handler which
// ignores its context cannot hold the caller past a timeout) pays, on a
// fresh goroutine, for growing its stack again — JSON and schema validation
// need more than the initial 8 KiB — and for the scheduler's wake-up. An
// idle worker already has its stack; handing it the job costs a channel
// send and no allocation.
package workers

import "time"

// Pool runs each submitted job on an idle worker, or a new one when none is
// idle. A worker that has been idle for the pool's idle time exits. The
// zero value is not usable: use New.
type Pool[T any] struct {
	run  func(T)
	work chan T
	idle time.Duration
}

// New returns a pool running run on each job.
func New[T any](run func(T), idle time.Duration) *Pool[T] {
	return &Pool[T]{run: run, work: make(chan T), idle: idle}
}

// Submit runs run(job) on a worker goroutine and returns at once.
func (p *Pool[T]) Submit(job T) {
	select {
	case p.work <- job:
	default:
		go p.worker(job)
	}
}

func (p *Pool[T]) worker(job T) {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		p.run(job)
		t.Reset(p.idle)
		select {
		case job = <-p.work:
		case <-t.C:
			return
		}
	}
}
