package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
)

// TestSecondSignalStopsAtOnce: the first SIGINT cancels the context (the
// graceful stop); a second one while the stop runs calls exit, where it
// was ignored and the stop went on waiting for running tools (a lifecycle
// probe); after stop, no signal calls it.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	exited := make(chan struct{}, 1)
	ctx, stop := signalContextExit(func() { exited <- struct{}{} })
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second): // a signal to itself arrives in microseconds
		t.Fatal("the first SIGINT did not cancel the context")
	}
	select {
	case <-exited:
		t.Fatal("exit called at the first signal")
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	testutil.Recv(t, exited, "exit at the second SIGINT")
}
