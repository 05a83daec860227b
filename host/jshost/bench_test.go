package jshost_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/tool"
)

// echoArtifact is the artifact brain build makes of
// examples/ts-tools/src/echo.tool.ts (build's golden test keeps it in
// step): the TypeScript twin of the Go echo artifact host's
// BenchmarkEchoArtifact runs.
const echoArtifact = "testdata/echo.tool.json"

var echoInput = json.RawMessage(`{"message":"the quick brown fox jumps over the lazy dog"}`)

// BenchmarkEchoScript: the TypeScript echo tool, warm (its session's realm
// is made), through kernel invoke, as BenchmarkEchoArtifact measures the
// Go one.
func BenchmarkEchoScript(b *testing.B) {
	h := newHost(b, nil)
	env := newEnv(b)
	attach(b, env, h, echoArtifact, nil)
	ctx := context.Background()
	for range 1000 { // the realm's first calls compile the tool's paths
		if out := env.Invoke(ctx, "echo", kernel.Call{ID: "c", Input: echoInput}); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if out := env.Invoke(ctx, "echo", kernel.Call{ID: "c", Input: echoInput}); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
}

// BenchmarkProvisionScriptWarmCache: attach of the TypeScript echo tool
// with its bytecode in the disk cache, by a fresh host (so only the disk
// cache helps): verify the payload, load the sealed bytecode, make a
// realm, evaluate the module, check the tool, run init.
func BenchmarkProvisionScriptWarmCache(b *testing.B) {
	dir := b.TempDir()
	h := newHost(b, &jshost.Options{CacheDir: dir})
	env := newEnv(b)
	attach(b, env, h, echoArtifact, nil) // fills the cache
	env.Detach("echo")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h2, err := jshost.New(&jshost.Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		a, err := h2.LoadManifest(echoArtifact)
		if err != nil {
			b.Fatal(err)
		}
		if rec := env.Attach(ctx, kernel.Attachment{Tool: a}); !rec.OK() {
			b.Fatal(rec.Failures)
		}
		b.StopTimer()
		env.Detach("echo")
		b.StartTimer()
	}
}

// BenchmarkNewSessionScript: the first call of a new session, which makes
// its realm (the bytecode is in memory): what per-session state costs.
func BenchmarkNewSessionScript(b *testing.B) {
	h := newHost(b, &jshost.Options{MaxSessions: 1 << 30})
	a, err := h.LoadManifest(echoArtifact)
	if err != nil {
		b.Fatal(err)
	}
	inst, err := a.Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close()
	ender := inst.(tool.SessionEnder)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s := "s" + strconv.Itoa(i)
		i++
		if _, err := inst.Invoke(ctx, &tool.Call{ID: "c", Session: s, Input: echoInput}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ender.EndSession(s)
		b.StartTimer()
	}
}

// BenchmarkIdleRealm reports the memory an idle realm of the TypeScript
// echo tool holds (B/realm: the engine's heap after the module, init and
// one call), the figure issue 22 bounds at 2 MiB.
func BenchmarkIdleRealm(b *testing.B) {
	h := newHost(b, nil)
	a, err := h.LoadManifest(echoArtifact)
	if err != nil {
		b.Fatal(err)
	}
	var heap int64
	for b.Loop() {
		inst, err := a.Provision(context.Background(), tool.Handles{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inst.Invoke(context.Background(), &tool.Call{ID: "c", Session: "s", Input: echoInput}); err != nil {
			b.Fatal(err)
		}
		heap = jshost.HeapOf(inst, "s")
		_ = inst.Close()
	}
	b.ReportMetric(float64(heap), "B/realm")
}

// TestIdleRealm holds the bound: an idle realm of the echo tool takes at
// most 2 MiB.
func TestIdleRealm(t *testing.T) {
	h := newHost(t, nil)
	a, err := h.LoadManifest(echoArtifact)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := a.Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	if _, err := inst.Invoke(context.Background(), &tool.Call{ID: "c", Session: "s", Input: echoInput}); err != nil {
		t.Fatal(err)
	}
	heap := jshost.HeapOf(inst, "s")
	t.Logf("an idle realm of the echo tool: %d KiB", heap>>10)
	if heap <= 0 || heap > 2<<20 {
		t.Fatalf("an idle realm holds %d bytes, want at most 2 MiB", heap)
	}
}
