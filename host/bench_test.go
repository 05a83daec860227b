package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/host/testdata/tools/echo"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/tool"
)

var benchInput = json.RawMessage(`{"text":"the quick brown fox jumps over the lazy dog"}`)

func benchInvoke(b *testing.B, t tool.Attachable) {
	e := newEnv(b, nil)
	attach(b, e, kernel.Attachment{Tool: t})
	ctx := context.Background()
	// Warm up as the anchors' wazero benchmarks do: a fresh Go guest grows
	// its linear memory over its first thousands of calls, and each
	// memory.grow copies it; a long-lived instance is past that.
	for range 20_000 {
		if out := e.Invoke(ctx, "echo", kernel.Call{ID: "c", Input: benchInput}); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if out := e.Invoke(ctx, "echo", kernel.Call{ID: "c", Input: benchInput}); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
}

// BenchmarkEchoNative: the echo tool as a native Go tool, through kernel
// invoke.
func BenchmarkEchoNative(b *testing.B) { benchInvoke(b, echo.Tool) }

// BenchmarkEchoArtifact: the same tool built as an artifact, warm (the
// instance is provisioned), through kernel invoke.
func BenchmarkEchoArtifact(b *testing.B) {
	h := newHost(b, nil)
	benchInvoke(b, load(b, h, "echo"))
}

// BenchmarkProvisionWarmCache: attach of the echo artifact with its
// compiled code in the cache: compile (cache hit), instantiate,
// _initialize and brain_init.
func BenchmarkProvisionWarmCache(b *testing.B) {
	dir := b.TempDir()
	h := newHost(b, &host.Options{CacheDir: dir})
	a := load(b, h, "echo")
	e := newEnv(b, nil)
	attach(b, e, kernel.Attachment{Tool: a}) // fills the cache
	e.Detach("echo")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h2, err := host.New(ctx, &host.Options{CacheDir: dir}) // a fresh runtime: only the disk cache helps
		if err != nil {
			b.Fatal(err)
		}
		a2, err := h2.LoadManifest(filepath.Join(artifacts, "echo.tool.json"))
		if err != nil {
			b.Fatal(err)
		}
		if rec := e.Attach(ctx, kernel.Attachment{Tool: a2}); !rec.OK() {
			b.Fatal(rec.Failures)
		}
		b.StopTimer()
		e.Detach("echo")
		_ = h2.Close(ctx)
		b.StartTimer()
	}
}

// BenchmarkCompileCold: attach of the echo artifact with an empty cache.
func BenchmarkCompileCold(b *testing.B) {
	payload, err := os.ReadFile(filepath.Join(artifacts, "echo.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e := newEnv(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		b.StartTimer()
		h, err := host.New(ctx, &host.Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		m := load(b, h, "echo").Manifest()
		if err := h.AddPayload(m.Payload, payload); err != nil {
			b.Fatal(err)
		}
		if rec := e.Attach(ctx, kernel.Attachment{Tool: h.Artifact(m)}); !rec.OK() {
			b.Fatal(rec.Failures)
		}
		b.StopTimer()
		e.Detach("echo")
		_ = h.Close(ctx)
		b.StartTimer()
	}
}

// BenchmarkEchoArtifactDirect: BenchmarkEchoArtifact without the kernel
// (no schema validation, no handles to acquire): the instance's own
// Invoke, under a deadline as the kernel sets one, so that the kernel's
// share of the warm call shows.
func BenchmarkEchoArtifactDirect(b *testing.B) {
	h := newHost(b, nil)
	inst, err := load(b, h, "echo").Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close()
	call := &tool.Call{ID: "c", Input: benchInput}
	invoke := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := inst.Invoke(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
	for range 20_000 { // warm up as benchInvoke does
		invoke()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		invoke()
	}
}

// BenchmarkEchoArtifactNewSession: the first call of a session to the
// echo artifact, which an instance of another session never serves: a
// fresh instance is made for it (instantiate, _initialize, brain_init)
// and closed when the session ends. The price of keeping artifact state
// in its session, beside BenchmarkEchoArtifact's warm call.
func BenchmarkEchoArtifactNewSession(b *testing.B) {
	h := newHost(b, nil)
	inst, err := load(b, h, "echo").Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close()
	ender := inst.(tool.SessionEnder)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := strconv.Itoa(i)
		if _, err := inst.Invoke(ctx, &tool.Call{ID: "c", Session: id, Input: benchInput}); err != nil {
			b.Fatal(err)
		}
		ender.EndSession(id)
	}
}
