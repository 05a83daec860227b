package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
)

// TestRunTimeoutBoundsAttach: `brain run --timeout` bounds the attach, not
// only the call: a tool whose init never returns (it spins, or sleeps an
// hour) fails with timeout and exit status 1 soon after the deadline.
func TestRunTimeoutBoundsAttach(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"build", "../../host/testdata/tools/stall", "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("build: %d %s %s", code, stdout.String(), stderr.String())
	}
	artifact := filepath.Join(out, "stall.tool.json")
	cache := t.TempDir()
	if err := testutil.WarmCache(cache, artifact); err != nil { // under -race: testutil.WarmCache says why
		t.Fatal(err)
	}
	for _, mode := range []string{"ok", "spin", "sleep"} { // ok first: it fills the compilation cache
		t.Run("init "+mode, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "mode"), []byte(mode), 0o644); err != nil {
				t.Fatal(err)
			}
			timeout := time.Second
			if mode == "ok" {
				// It compiles the payload cold: seconds alone, over a minute
				// under -race on a loaded machine (measured: 75-80 s). Not
				// what this test is about.
				timeout = 10 * time.Minute
			}
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(ctx, []string{"run", artifact, "--input", `{"do":"answer"}`, "--workspace", ws, "--cache", cache,
				"--timeout", timeout.String()}, &stdout, &stderr)
			took := time.Since(start)
			if mode == "ok" {
				if code != 0 || !strings.Contains(stdout.String(), `"awake"`) {
					t.Fatalf("exit %d, stdout %s, stderr %s", code, stdout.String(), stderr.String())
				}
				return
			}
			// The host's own init bound is 30 s: this is --timeout's doing.
			if code != 1 || !strings.Contains(stdout.String(), `"code":"timeout"`) || took > timeout+10*time.Second {
				t.Fatalf("exit %d after %v, stdout %s, stderr %s; want exit 1 with a timeout", code, took, stdout.String(), stderr.String())
			}
		})
	}
}

// TestRunTimeoutMustBePositive: a --timeout of zero or less is bad usage
// (exit 2, before anything loads), as other bad flags are; it had run
// the attach with a deadline already passed.
func TestRunTimeoutMustBePositive(t *testing.T) {
	for _, d := range []string{"0s", "-5s"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "nothing.tool.json", "--timeout", d}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--timeout must be positive") {
			t.Errorf("--timeout %s: exit %d, stderr %s; want 2 and a usage error", d, code, stderr.String())
		}
	}
}
