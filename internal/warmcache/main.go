// Command warmcache compiles WebAssembly artifacts into a host compilation
// cache: go run ./internal/warmcache -cache DIR ARTIFACT.tool.json...
//
// Tests run it (through testutil.WarmCache) when they are built with the
// race detector: wazero's compiler, instrumented by it, takes 15–20 s for
// one Go guest where it takes one without it, and what those tests check
// is the host loading and running the code, not the compiler under tsan.
// The cache's entries do not depend on the race detector (they are bound
// to the cache format, the instrumentation, wazero's and Go's versions and
// the platform), so the tests load what this wrote and verify it as any
// host does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/brainrt/brain/host"
)

func main() {
	cache := flag.String("cache", "", "the compilation cache directory (made if missing)")
	flag.Parse()
	if *cache == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: warmcache -cache DIR ARTIFACT.tool.json...")
		os.Exit(2)
	}
	if err := warm(*cache, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "warmcache:", err)
		os.Exit(1)
	}
}

// warm compiles every artifact into cacheDir, one host for all of them.
func warm(cacheDir string, manifests []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h, err := host.New(ctx, &host.Options{CacheDir: cacheDir})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	for _, m := range manifests {
		a, err := h.LoadManifest(m)
		if err != nil {
			return err
		}
		if err := a.Compile(ctx); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}
	return nil
}
