package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// The helper is built with -trimpath, as test.sh builds every package, so
// that it comes from the build cache.
func WarmCache(cacheDir string, manifests ...string) error {
	if !RaceEnabled || len(manifests) == 0 {
		return nil
	}
	// A test binary carries no module versions, so wazero calls itself
	// "dev" in it, and a cache entry is bound to wazero's version: the
	// helper is linked with the same name, or the tests would find its
	// entries stale and compile again.
	cacheDir, err := filepath.Abs(cacheDir)
	if err != nil {
		return err
	}
	args := []string{"run", "-trimpath", "-ldflags=-X=github.com/tetratelabs/wazero/internal/version.version=dev",
		"github.com/brainrt/brain/internal/warmcache", "-cache", cacheDir}
	for _, m := range manifests {
		abs, err := filepath.Abs(m)
		if err != nil {
			return err
		}
		args = append(args, abs)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleRoot                       // a test may have left the module (t.Chdir)
	cmd.Env = append(os.Environ(), "GOFLAGS=") // a test's -count or -race is not the helper's
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("warming the compilation cache %s: %w\n%s", cacheDir, err, out.String())
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
