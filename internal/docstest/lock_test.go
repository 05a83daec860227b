package docstest

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// machineWide makes the docs tests of one machine take turns: the docs'
// commands use the ports a reader uses (brain serve on 127.0.0.1:7777 and
// the others the docs name), so two suites running at once — two
// checkouts, or CI beside a developer's run — would take each other's
// ports ("bind: address already in use"). It holds an exclusive lock on a
// file in the temporary directory until the test ends, waiting for it as
// long as ctx allows.
func machineWide(t *testing.T, ctx context.Context) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "brain-docstest.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("the docs tests' machine-wide lock: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() }) // closing releases the lock
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			t.Fatalf("the docs tests' machine-wide lock: %v", err)
		}
		timer := time.NewTimer(250 * time.Millisecond) // polling: flock has no timeout, and ctx must bound the wait
		select {
		case <-ctx.Done():
			timer.Stop()
			t.Fatalf("another docs test on this machine held the ports for %v: %v", time.Since(start).Round(time.Second), ctx.Err())
		case <-timer.C:
		}
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %v for another docs test on this machine (its ports are the docs')", waited.Round(time.Second))
	}
}
