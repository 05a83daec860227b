package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brainrt/brain/store"
)

// closedStoreWithKept makes a store holding session "kept" (2 events),
// closes it, and returns its directory and its block files.
func closedStoreWithKept(t *testing.T) (dir string, blocks []string) {
	t.Helper()
	dir = t.TempDir()
	st := open(t, dir, nil)
	appendAll(t, journal(t, st, "kept"), benchEvent(1), benchEvent(2))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	msgs := filepath.Join(dir, "jetstream", "$G", "streams", "BRAIN_EVENTS", "msgs")
	blocks, _ = filepath.Glob(filepath.Join(msgs, "*.blk"))
	if len(blocks) == 0 {
		t.Fatalf("no block file in %s", msgs)
	}
	return dir, blocks
}

// TestUnrecoveredStreamIsNotReplaced: a stream whose files the embedded
// server cannot open (here a block file that is a symbolic link to
// itself, which no user may open; in the probe, one brain's user could not
// read) makes Open fail, naming the
// directory, and leaves the files as they were. Open made a new stream
// over them, emptying the block: every session lost (a lifecycle probe).
func TestUnrecoveredStreamIsNotReplaced(t *testing.T) {
	dir, blocks := closedStoreWithKept(t)
	kept, err := os.ReadFile(blocks[0])
	if err != nil {
		t.Fatal(err)
	}
	// A block the server cannot open: moved aside, a link to itself in
	// its place (ELOOP, root or not).
	aside := blocks[0] + ".aside"
	if err := os.Rename(blocks[0], aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(blocks[0]), blocks[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st2, err := store.Open(ctx, &store.Options{DataDir: dir})
	if err == nil {
		_ = st2.Close()
		t.Fatal("a store whose stream the server could not open was opened")
	}
	if !strings.Contains(err.Error(), blocks[0]) || !strings.Contains(err.Error(), "must be able to read and write every file") {
		t.Fatalf("the refusal: %v", err)
	}
	if got, _ := os.ReadFile(aside); string(got) != string(kept) {
		t.Fatal("the block changed")
	}
	// Put back, the store opens with its session.
	if err := os.Remove(blocks[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, blocks[0]); err != nil {
		t.Fatal(err)
	}
	// A file where the stream keeps its obs directory failed the
	// recovery too, and the server then deleted the stream's blocks (the
	// re-probe).
	obs := filepath.Join(dir, "jetstream", "$G", "streams", "BRAIN_EVENTS", "obs")
	if err := os.Rename(obs, obs+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(obs, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st2, err := store.Open(ctx, &store.Options{DataDir: dir}); err == nil {
		_ = st2.Close()
		t.Fatal("a store whose stream's obs is a file was opened")
	} else if !strings.Contains(err.Error(), obs) {
		t.Fatalf("the refusal: %v", err)
	}
	if got, _ := os.ReadFile(blocks[0]); string(got) != string(kept) {
		t.Fatal("the block changed")
	}
	if err := os.Remove(obs); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(obs+".aside", obs); err != nil {
		t.Fatal(err)
	}
	st3 := open(t, dir, nil)
	if got := load(t, st3, "kept"); len(got) != 2 {
		t.Fatalf("after the fix: %d events, want 2", len(got))
	}
}

// TestStoreThroughASymlink: a store whose jetstream directory, or a
// stream's msgs, is a link to another volume opens with its sessions;
// the files check refused it ("is a directory": the re-probe).
func TestStoreThroughASymlink(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	st := open(t, dir, nil)
	appendAll(t, journal(t, st, "kept"), benchEvent(1), benchEvent(2))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "jetstream")
	if err := os.Rename(js, filepath.Join(elsewhere, "js")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "js"), js); err != nil {
		t.Fatal(err)
	}
	msgs := filepath.Join(elsewhere, "js", "$G", "streams", "BRAIN_EVENTS", "msgs")
	if err := os.Rename(msgs, filepath.Join(elsewhere, "msgs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "msgs"), msgs); err != nil {
		t.Fatal(err)
	}
	st2 := open(t, dir, nil)
	if got := load(t, st2, "kept"); len(got) != 2 {
		t.Fatalf("through links: %d events, want 2", len(got))
	}
}

// TestStoreFileKinds: a named pipe where the store keeps a file hung the
// start for ever (the embedded server's read waited on it, before brain
// listened or logged), and a directory where a block is kept made the
// server give the stream's recovery up, and brain made it anew, empty
// (an adversarial probe). Each is refused naming the path and what it
// is, and nothing in the store changes; put right, the store opens with
// its session.
func TestStoreFileKinds(t *testing.T) {
	dir, blocks := closedStoreWithKept(t)
	for _, c := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"a named pipe", "not a regular file (a named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"a directory", "a directory, where the stream keeps a file", func(p string) error { return os.Mkdir(p, 0o700) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			aside := blocks[0] + ".aside"
			if err := os.Rename(blocks[0], aside); err != nil {
				t.Fatal(err)
			}
			if err := c.make(blocks[0]); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st2, err := store.Open(ctx, &store.Options{DataDir: dir})
			if err == nil {
				_ = st2.Close()
				t.Fatalf("a store with %s for a block was opened", c.name)
			}
			if !strings.Contains(err.Error(), blocks[0]) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the refusal: %v", err)
			}
			if err := os.Remove(blocks[0]); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(aside, blocks[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	st3 := open(t, dir, nil)
	if got := load(t, st3, "kept"); len(got) != 2 {
		t.Fatalf("after the fix: %d events, want 2", len(got))
	}
}
