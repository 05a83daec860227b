// Command warmcache does, in a process without the race detector, the
// work that tests built with it spend minutes on and do not test:
//
//	go run ./internal/warmcache -cache DIR ARTIFACT.tool.json...
//	go run ./internal/warmcache -scripts PROJECT -out DIR -jscache DIR
//
// The first compiles WebAssembly artifacts into a host compilation cache;
// the second builds a TypeScript project with brain build (zod's schemas
// converted in the JavaScript engine) and compiles each tool's bytecode
// into a jshost cache. Tests run it through testutil.WarmCache and
// testutil.BuildScripts, which say why: wazero's compiler and the
// transpiled QuickJS run 10–50× slower under the race detector. What it
// writes does not depend on the race detector (entries are bound to the
// cache format, the engine's and Go's versions and the platform), so the
// tests' hosts load it and verify it as any host does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/host/jshost"
)

func main() {
	cache := flag.String("cache", "", "compile the WebAssembly artifacts named as arguments into this compilation cache")
	scripts := flag.String("scripts", "", "build this TypeScript project (with -out and -jscache)")
	out := flag.String("out", "", "where -scripts writes the artifacts")
	jsCache := flag.String("jscache", "", "the bytecode cache -scripts compiles the artifacts into")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	switch {
	case *cache != "" && flag.NArg() > 0 && *scripts == "":
		err = warm(ctx, *cache, flag.Args())
	case *scripts != "" && *out != "" && *jsCache != "" && flag.NArg() == 0 && *cache == "":
		err = buildScripts(ctx, *scripts, *out, *jsCache)
	default:
		fmt.Fprintln(os.Stderr, "usage: warmcache -cache DIR ARTIFACT.tool.json...\n       warmcache -scripts PROJECT -out DIR -jscache DIR")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmcache:", err)
		os.Exit(1)
	}
}

// warm compiles every artifact into cacheDir, one host for all of them.
func warm(ctx context.Context, cacheDir string, manifests []string) error {
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

// buildScripts builds project into out and compiles every artifact's
// bytecode into jsCache.
func buildScripts(ctx context.Context, project, out, jsCache string) error {
	arts, err := build.BuildScripts(ctx, project, build.Options{Out: out})
	if err != nil {
		return err
	}
	h, err := jshost.New(&jshost.Options{CacheDir: jsCache})
	if err != nil {
		return err
	}
	for _, b := range arts {
		a, err := h.LoadManifest(b.ManifestPath)
		if err != nil {
			return err
		}
		if err := a.Compile(ctx); err != nil {
			return fmt.Errorf("%s: %w", b.ManifestPath, err)
		}
	}
	return nil
}
