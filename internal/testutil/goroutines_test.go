package testutil_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/internal/workers"
)

// TestBusyGoroutinesCountsWorkersRunningAJob: a pool worker running a job
// counts; the same worker idle does not.
func TestBusyGoroutinesCountsWorkersRunningAJob(t *testing.T) {
	release, ran := make(chan struct{}), make(chan struct{})
	p := workers.New(func(struct{}) { ran <- struct{}{}; <-release }, time.Minute)
	before, _ := testutil.BusyGoroutines()
	p.Submit(struct{}{})
	<-ran
	if busy, stacks := testutil.BusyGoroutines(); busy != before+1 {
		t.Fatalf("%d busy goroutines with a worker running a job, want %d\n%s", busy, before+1, stacks)
	}
	close(release)
	// The worker goes idle a moment after its job returns (back on the
	// free list, then waiting in its select).
	deadline := time.Now().Add(testutil.WaitLimit)
	for {
		busy, stacks := testutil.BusyGoroutines()
		if busy == before && p.Idle() == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d busy goroutines with the worker idle, want %d\n%s", busy, before, stacks)
		}
		runtime.Gosched()
	}
}
