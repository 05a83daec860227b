package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// enteredFS is an fs handle whose ReadFile of "block" says when it is
// entered, then blocks until release is closed.
type enteredFS struct {
	handle.FS
	entered chan<- struct{}
	release <-chan struct{}
}

func (e enteredFS) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if path == "block" {
		e.entered <- struct{}{}
		<-e.release
		return nil, errors.New("released")
	}
	return e.FS.ReadFile(ctx, path)
}

// TestGuestMemoryIsUnmapped: every guest memory mapped outside the Go heap
// is unmapped once its instance is gone — detached, stopped at a deadline
// and replaced, failed in its init, or closed by Host.Close while a call
// was running on it, which goes on touching its memory after the host
// function it waited in returns (an unmapped memory would crash the
// process there).
func TestGuestMemoryIsUnmapped(t *testing.T) {
	if !host.MappedMemory {
		t.Skip("guest memories are Go slices on this platform")
	}
	before := host.Reservations()
	wantNone := func(t *testing.T, when string) {
		t.Helper()
		if n := host.Reservations() - before; n != 0 {
			t.Fatalf("%s: %d guest memories still mapped", when, n)
		}
	}
	t.Run("detached, and stopped at a deadline", func(t *testing.T) {
		h := newHost(t, &host.Options{PoolSize: 2})
		fs, _ := stallFS(t)
		hs := tool.Handles{FS: fs}
		inst, err := load(t, h, "stall").Provision(context.Background(), hs, nil)
		must(t, err)
		if _, code, _ := invokeWithin(inst, hs, `{"do":"spin"}`, 100*time.Millisecond); code != protocol.CodeTimeout {
			t.Fatalf("spin: %q, want timeout", code)
		}
		if v, code, _ := invokeWithin(inst, hs, `{"do":"answer"}`, 30*time.Second); code != "" || string(v) != `"awake"` {
			t.Fatalf("answer: %s %q", v, code)
		}
		if n := host.Reservations() - before; n != 1 {
			t.Fatalf("%d guest memories mapped, want the one instance's", n)
		}
		must(t, inst.Close())
		wantNone(t, "after the detach")
	})
	t.Run("init fails", func(t *testing.T) {
		h := newHost(t, nil)
		if _, err := load(t, h, "initpanic").Provision(context.Background(), tool.Handles{}, nil); err == nil {
			t.Fatal("initpanic provisioned")
		}
		wantNone(t, "after the failed init")
	})
	t.Run("Host.Close during a call", func(t *testing.T) {
		h := newHost(t, &host.Options{PoolSize: 2})
		fs, _ := stallFS(t)
		entered, release := make(chan struct{}, 1), make(chan struct{})
		defer close(release)
		hs := tool.Handles{FS: enteredFS{FS: fs, entered: entered, release: release}}
		inst, err := load(t, h, "stall").Provision(context.Background(), hs, nil)
		must(t, err)
		defer inst.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := inst.Invoke(ctx, &tool.Call{ID: "c", Input: []byte(`{"do":"read","path":"block"}`), Handles: hs})
			done <- err
		}()
		<-entered
		// A second instance, idle when the host closes.
		if v, code, _ := invokeWithin(inst, hs, `{"do":"answer"}`, 30*time.Second); code != "" || string(v) != `"awake"` {
			t.Fatalf("answer: %s %q", v, code)
		}
		must(t, h.Close(context.Background()))
		cancel() // the guest resumes after its host function returns: its memory must still be there
		if err := <-done; protocol.OutcomeOf(err).Err == nil {
			t.Fatal("the call on a closed host succeeded")
		}
		_, err = inst.Invoke(context.Background(), &tool.Call{ID: "d", Input: []byte(`{"do":"answer"}`), Handles: hs})
		if out := protocol.OutcomeOf(err); out.IsOK() || out.Err.Code != protocol.CodeUnavailable {
			t.Fatalf("a call after Host.Close: %v, want unavailable", err)
		}
		wantNone(t, "after Host.Close and the call's end")
	})
}
