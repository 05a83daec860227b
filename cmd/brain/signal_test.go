package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
)

// TestSecondSignalStopsAtOnce: the first SIGINT cancels the context (the
// graceful stop); a second one while the stop runs calls exit, where it
// was ignored and the stop went on waiting for running tools (a lifecycle
// probe) — unless it comes within the grace of the first, as timeout(1)'s
// signal to the process and then its group do (the re-probe).
func TestSecondSignalStopsAtOnce(t *testing.T) {
	// The test's own watch on SIGINT, kept from before the first signal
	// to after the last has arrived: a signal the runtime takes while
	// nothing watches SIGINT ends the whole test binary (Go's default).
	// The kernel may hand a signal to another thread, which takes it
	// later, so a stop() right after kill could leave the last one
	// unwatched — it did once in CI, ending the package outside any test.
	// Every watcher gets a signal in the same step, so once seen has it,
	// signalContextExit's channel has it too.
	seen := make(chan os.Signal, 4)
	signal.Notify(seen, os.Interrupt)
	defer signal.Stop(seen)
	interrupt := func() {
		t.Helper()
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		testutil.Recv(t, seen, "the SIGINT sent")
	}
	cancelled := func(ctx context.Context) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second): // a signal to itself arrives in microseconds
			t.Fatal("the first SIGINT did not cancel the context")
		}
	}

	exited := make(chan struct{}, 1)
	ctx, stop := signalContextExit(0, func() { exited <- struct{}{} })
	interrupt()
	cancelled(ctx)
	select {
	case <-exited:
		t.Fatal("exit called at the first signal")
	default:
	}
	interrupt()
	testutil.Recv(t, exited, "exit at the second SIGINT")
	stop()

	// Within the grace (an hour here), a second signal is the same stop;
	// a third after stop is nobody's.
	ctx, stop = signalContextExit(time.Hour, func() { exited <- struct{}{} })
	interrupt()
	cancelled(ctx)
	interrupt()
	stop() // returns once the goroutine has nothing more to read
	select {
	case <-exited:
		t.Fatal("exit called at a second signal within the grace")
	default:
	}
}
