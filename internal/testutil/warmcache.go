package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// WarmCache compiles the WebAssembly artifacts named by manifests (paths
// to <name>.tool.json) into the host compilation cache cacheDir, in a
// process built without the race detector, when this one has it; without
// it, it does nothing (the test's own host compiles as fast).
//
// Under the race detector wazero's compiler takes 15–20 s for one Go guest
// (tenfold its time without), and a test suite that compiles a dozen of
// them spends minutes in a compiler it does not test. The test's host still
// reads, verifies and loads every entry itself: only the compile moves.
func WarmCache(cacheDir string, manifests ...string) error {
	if !RaceEnabled || len(manifests) == 0 {
		return nil
	}
	cacheDir, err := filepath.Abs(cacheDir)
	if err != nil {
		return err
	}
	args := []string{"-cache", cacheDir}
	for _, m := range manifests {
		abs, err := filepath.Abs(m)
		if err != nil {
			return err
		}
		args = append(args, abs)
	}
	if err := runWarmcache(args...); err != nil {
		return fmt.Errorf("warming the compilation cache %s: %w", cacheDir, err)
	}
	return nil
}

// BuildScripts builds the TypeScript project into out, as build.BuildScripts
// does, and compiles each tool's bytecode into the jshost cache jsCache, in
// a process without the race detector when this one has it: the transpiled
// JavaScript engine, which converts the zod schemas at build time and
// compiles the bundles, runs 20–50× slower under it (a minute for eight
// tools). It reports false without the race detector, doing nothing: the
// caller builds in its own process (testutil does not import build, which
// would make every test binary link esbuild).
func BuildScripts(project, out, jsCache string) (bool, error) {
	if !RaceEnabled {
		return false, nil
	}
	var abs [3]string
	for i, p := range []string{project, out, jsCache} {
		a, err := filepath.Abs(p)
		if err != nil {
			return false, err
		}
		abs[i] = a
	}
	if err := runWarmcache("-scripts", abs[0], "-out", abs[1], "-jscache", abs[2]); err != nil {
		return false, fmt.Errorf("building %s: %w", project, err)
	}
	return true, nil
}

// runWarmcache runs internal/warmcache with args, built without the race
// detector and with -trimpath (as test.sh builds every package first, so
// that it comes from the build cache).
func runWarmcache(args ...string) error {
	// wazero files its cache under, and a cache entry is bound to, the
	// wazero version it reads from the binary's build information; a test
	// binary carries none and says "dev", a `go run` binary "v1.12.0". The
	// helper is linked with the version this binary reports (the code is
	// the same: one go.mod builds both), or the tests would find its
	// entries stale and compile again.
	cmd := exec.Command("go", append([]string{"run", "-trimpath", "-ldflags=-X=" + wazeroVersionVar + "=" + wazeroVersion(),
		"github.com/brainrt/brain/internal/warmcache"}, args...)...)
	cmd.Env = append(os.Environ(), "GOFLAGS=") // a test's -count or -race is not the helper's
	cmd.Dir = moduleRoot                       // a test may have left the module (t.Chdir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	return nil
}

// moduleRoot is brain's module directory, found from the working directory
// a test starts in (its package's), before any test changes it.
var moduleRoot = func() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}()

// wazeroVersionVar is the variable wazero reads its version from first.
const wazeroVersionVar = "github.com/tetratelabs/wazero/internal/version.version"

// wazeroVersion returns the version wazero finds in this binary, as
// wazero's internal/version.GetWazeroVersion does.
func wazeroVersion() string {
	v := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if strings.Contains(d.Path, "github.com/tetratelabs/wazero") {
				v = d.Version
			}
		}
		if v == "" || v == "(devel)" {
			v = info.Main.Version
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}
