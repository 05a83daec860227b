package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/settle"
	"github.com/brainrt/brain/internal/testutil"
)

// sink keeps TestServeSettles' allocations from being optimised away.
var sink []byte

// TestServeSettles: brain serve runs internal/settle, so that once the
// node goes quiet after a busy spell it gives its free memory back, and
// says so in its debug log. settle's own tests hold its timing; this one
// holds the wiring, with short timings: 20 ms intervals, quiet after 100
// ms under 256 MiB/s, so that only the test's own bursts count as busy.
func TestServeSettles(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("workspace", 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logged testutil.LockedBuffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, _, done := serveLogged(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", consoleAddr: "off", idle: time.Hour,
		settle: settle.Options{Interval: 20 * time.Millisecond, Quiet: 100 * time.Millisecond, QuietRate: 256 << 20}}, log)
	// A burst of 64 MiB, then 300 ms of quiet to answer it, until the
	// release is logged: on a loaded machine a burst may be spread over
	// intervals too slow to count as busy, and the next one is tried.
	released := false
	for deadline := time.Now().Add(30 * time.Second); !released && time.Now().Before(deadline); {
		for range 16 {
			sink = make([]byte, 4<<20)
		}
		sink = nil
		for quiet := time.Now().Add(300 * time.Millisecond); !released && time.Now().Before(quiet); {
			time.Sleep(10 * time.Millisecond) // polling the log, for at most 300 ms a burst
			released = strings.Contains(logged.String(), "settle: quiet: gave free memory back")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if !released {
		t.Fatalf("no release logged within 30 s of bursts and quiet spells; the log:\n%s", logged.String())
	}
}
