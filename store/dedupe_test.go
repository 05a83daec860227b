package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/brainrt/brain/store"
)

// TestEmbeddedStreamDeduplicationWindow: the embedded store's appends
// carry no message id, so its stream keeps the server's least
// deduplication window, 100 ms, not the default 2 minutes — within which
// the server reads back every stored message at each start to rebuild the
// ids (half of a start at a million fresh sessions). A store made before
// this is changed on its next open.
func TestEmbeddedStreamDeduplicationWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	st := open(t, dir, nil)
	cfg, err := store.StreamConfig(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Duplicates != 100*time.Millisecond {
		t.Fatalf("the embedded stream's deduplication window is %s, want 100ms", cfg.Duplicates)
	}
	// A journal appends and loads as before: no id is needed to refuse a
	// repeat (TestJournal* cover that); the window changes nothing of it.
	j := journal(t, st, "s1")
	appendAll(t, j, benchEvent(1), benchEvent(2))
	// A store of an earlier version, with the default window.
	if err := store.SetDuplicates(ctx, st, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, nil)
	events, err := st.Load(ctx, "s1")
	if err != nil || len(events) != 2 {
		t.Fatalf("after a restart: %d events, %v", len(events), err)
	}
	if cfg, err = store.StreamConfig(ctx, st); err != nil || cfg.Duplicates != 100*time.Millisecond {
		t.Fatalf("after a restart the window is %s (%v), want 100ms", cfg.Duplicates, err)
	}
}
