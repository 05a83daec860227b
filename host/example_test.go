package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/kernel"
)

// ExampleHost_Stats reads the pool of an attached artifact, as a metrics
// collector would: how many instances exist, how many run a call, and how
// many were discarded (trapped, stopped at a deadline, failed to start).
func ExampleHost_Stats() {
	ctx := context.Background()
	h, err := host.New(ctx, &host.Options{CacheDir: cacheDir, PoolSize: 2})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	echo, err := h.LoadManifest(filepath.Join(artifacts, "echo.tool.json"))
	if err != nil {
		panic(err)
	}
	env := kernel.New(nil)
	env.Setup(ctx)
	defer env.Close()
	env.Attach(ctx, kernel.Attachment{Tool: echo})
	env.Invoke(ctx, "echo", kernel.Call{Input: json.RawMessage(`{"text":"hi"}`)})

	for _, s := range h.Stats() {
		fmt.Printf("%s: %d of %d instances, %d in use, %d discarded\n", s.Tool, s.Size, s.Limit, s.InUse, s.Discards)
	}
	// Output: echo: 1 of 2 instances, 0 in use, 0 discarded
}

// ExampleArtifact_Compile warms a compilation cache at deploy time: a host
// started later over the same directory (this process or another) loads
// the compiled code at attach instead of compiling it.
func ExampleArtifact_Compile() {
	ctx := context.Background()
	h, err := host.New(ctx, &host.Options{CacheDir: cacheDir})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	echo, err := h.LoadManifest(filepath.Join(artifacts, "echo.tool.json"))
	if err != nil {
		panic(err)
	}
	if err := echo.Compile(ctx); err != nil {
		panic(err)
	}
	fmt.Println("compiled", echo.Manifest().Name, "into", filepath.Base(cacheDir))
	// Output: compiled echo into cache
}
