// Package testutil holds the helpers brain's tests share. Only tests import
// it.
package testutil

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitLimit bounds every wait in tests: a test that would hang fails
// instead. Inside a testing/synctest bubble it is fake time.
const WaitLimit = 5 * time.Second

// Context returns a context that ends after WaitLimit or with the test.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	t.Cleanup(cancel)
	return ctx
}

// Recv receives one value from ch, failing the test after WaitLimit.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(WaitLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", WaitLimit, what)
		panic("unreachable")
	}
}

// SkipUnderRace skips t when the race detector is on: the JavaScript
// engine (modernc.org/quickjs, C transpiled to Go) runs 20–50× slower
// under it, and a test that drives the engine to its memory limit or its
// deadline, or runs zod in it at build time, takes minutes there. test.sh
// runs every package that calls it again without the race detector (it
// finds them with git grep), where these run;
// the engine's Go side (slots, realms, cancellation) stays under the race
// detector through the package's other tests.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if RaceEnabled {
		t.Skip("the JavaScript engine under the race detector: test.sh runs this package without it (testutil.SkipUnderRace)")
	}
}

// BusyGoroutines counts the process's goroutines other than idle
// internal/workers pool workers (which a pool keeps for a while and exits
// on its own), and returns all their stacks: a leak check's count. A
// worker running a job counts — its stack has the job's frames above the
// pool's loop.
func BusyGoroutines() (int, string) {
	buf := make([]byte, 8<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		if !idleWorker(g) {
			n++
		}
	}
	return n, stacks
}

// idleWorker reports whether a goroutine's stack (runtime.Stack's text)
// is a pool worker waiting for a job: its first frame outside the runtime
// is the pool's loop.
func idleWorker(stack string) bool {
	for _, line := range strings.Split(stack, "\n")[1:] { // after "goroutine N [state]:"
		if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "runtime.") {
			continue
		}
		return strings.HasPrefix(line, "github.com/brainrt/brain/internal/workers.(*Pool[")
	}
	return false
}

// LockedBuffer is a bytes.Buffer that a logger may write from any
// goroutine while a test reads it.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Len returns the number of bytes written.
func (b *LockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// String returns what was written.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
