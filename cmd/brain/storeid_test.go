package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
)

// TestStoreMadeAnewIsSaid: a data directory whose nats/ was deleted
// starts (with no sessions), and says so in the log — once, naming what
// to do; a start on the same store, or a first start, says nothing.
func TestStoreMadeAnewIsSaid(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	start := func() string {
		t.Helper()
		var logs testutil.LockedBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, _, done := serveLogged(t, ctx, serveArgs{addr: "127.0.0.1:0", data: data, consoleAddr: "off", idle: time.Hour}, slog.New(slog.NewTextHandler(&logs, nil)))
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve: %v", err)
		}
		return logs.String()
	}
	t.Chdir(dir) // the default workspace is made here
	const said = "the session store was made anew"
	if logs := start(); strings.Contains(logs, said) {
		t.Fatalf("a first start said the store was made anew:\n%s", logs)
	}
	if logs := start(); strings.Contains(logs, said) {
		t.Fatalf("a start on the same store said it was made anew:\n%s", logs)
	}
	if err := os.RemoveAll(filepath.Join(data, "nats")); err != nil {
		t.Fatal(err)
	}
	if logs := start(); !strings.Contains(logs, said) || !strings.Contains(logs, "restore the data directory from a backup") {
		t.Fatalf("a start after nats/ was deleted said nothing of it:\n%s", logs)
	}
	if logs := start(); strings.Contains(logs, said) {
		t.Fatalf("the start after that said it again:\n%s", logs)
	}
}
