// Command precompile compiles tool artifacts into a host's compilation
// cache, so that a test binary's host loads compiled code instead of
// compiling it.
//
//	precompile -cache DIR a.tool.json b.tool.json …
//
// Package toolstest runs it with `go run`, built without the race detector:
// under -race, wazero's compiler itself is instrumented and compiling one
// payload takes about 20 s instead of 2. The compiled code does not depend
// on how the compiler was built: wazero keys its cache by the module's
// hash, wazero's version and the CPU's features, and this command compiles
// through host.New, with exactly the configuration of the test's host.
//
// Each artifact is provisioned once with no handles and no bindings, then
// closed. A provisioning that fails after compiling (a tool whose init needs
// its bindings) is expected and ignored; a payload that does not load or
// compile is reported, and the command exits 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/tool"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("precompile", flag.ContinueOnError)
	cache := fs.String("cache", "", "the compilation cache directory (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cache == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: precompile -cache DIR manifest.tool.json…")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h, err := host.New(ctx, &host.Options{CacheDir: *cache})
	if err != nil {
		fmt.Fprintln(os.Stderr, "precompile:", err)
		return 1
	}
	defer h.Close(context.Background())
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	errs := make([]error, fs.NArg())
	for i, path := range fs.Args() {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = compile(ctx, h, path)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "precompile:", err)
		return 1
	}
	return 0
}

// compile loads one artifact and provisions it, which compiles its payload
// into the cache.
func compile(ctx context.Context, h *host.Host, path string) error {
	a, err := h.LoadManifest(path)
	if err != nil {
		return err
	}
	inst, err := a.Provision(ctx, tool.Handles{}, nil)
	if err != nil {
		// Compilation failures are the host's "does not compile"; anything
		// later (init without bindings) is expected.
		if strings.Contains(err.Error(), "does not compile") {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	return inst.Close()
}
