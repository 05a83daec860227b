package jshost_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
)

// TestCache: bytecode is cached under the cache directory, sealed; a
// later host loads it, and an entry changed on disk is dropped and the
// payload compiled again, never run.
func TestCache(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	dir := t.TempDir()
	path := payload{name: "t.echo", src: echo}.write(t, dir)
	run := func() {
		t.Helper()
		h := newHost(t, &jshost.Options{CacheDir: cache})
		env := newEnv(t)
		attach(t, env, h, path, nil)
		out := env.Invoke(context.Background(), "t.echo", kernel.Call{ID: "c1", Input: json.RawMessage(`{"x":1}`)})
		wantOutcome(t, out, `{"echo":{"x":1},"calls":1,"callId":"c1","hasDeadline":true}`, "", "")
		_ = env.Close()
	}
	run()
	entries, _ := filepath.Glob(filepath.Join(cache, "js", "[0-9a-f]*"))
	if len(entries) != 1 {
		t.Fatalf("cache entries %v, want one", entries)
	}
	run() // from the cache
	b, err := os.ReadFile(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(entries[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	run() // the bad entry is dropped, the payload compiled again
	b2, _ := os.ReadFile(entries[0])
	if string(b2) == string(b) {
		t.Fatal("the changed entry was kept")
	}
	if err := os.Chmod(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := jshost.New(&jshost.Options{CacheDir: cache}); err == nil {
		t.Fatal("a cache directory others can write was accepted")
	}
}

// TestCompileFillsTheCache: Artifact.Compile writes the sealed bytecode
// entry without making a realm, a later host runs the payload from it
// unchanged, and a payload the host does not hold is refused.
func TestCompileFillsTheCache(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	path := payload{name: "t.echo", src: echo}.write(t, t.TempDir())
	h := newHost(t, &jshost.Options{CacheDir: cache})
	a, err := h.LoadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Compile(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(cache, "js", "[0-9a-f]*"))
	if len(entries) != 1 {
		t.Fatalf("cache entries after Compile %v, want one", entries)
	}
	before, err := os.Stat(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t)
	attach(t, env, newHost(t, &jshost.Options{CacheDir: cache}), path, nil)
	out := env.Invoke(context.Background(), "t.echo", kernel.Call{ID: "c1", Input: json.RawMessage(`{"x":1}`)})
	wantOutcome(t, out, `{"echo":{"x":1},"calls":1,"callId":"c1","hasDeadline":true}`, "", "")
	if after, err := os.Stat(entries[0]); err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the entry Compile wrote was rewritten (%v)", err)
	}
	m := a.Manifest()
	m.Payload = jshost.Identity([]byte("not held"))
	if err := h.Artifact(m).Compile(context.Background()); protocol.OutcomeOf(err).Err == nil || protocol.OutcomeOf(err).Err.Code != protocol.CodeNotFound {
		t.Fatalf("Compile of a payload the host does not hold: %v, want not_found", err)
	}
}
