package tools_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/tool"
)

// The TypeScript twins of the example tools (examples/ts-tools), built
// once by TestMain into JavaScript artifacts: every case of every example
// test runs natively, hosted (WebAssembly) and on the twin, with
// identical outcomes (toolstest.Twins), unless the case says why not.
var twins struct {
	host *jshost.Host
	arts map[string]*jshost.Artifact
}

// twinProject is the TypeScript project of the twins.
const twinProject = "../ts-tools"

// buildTwins installs the twins' npm dependencies when they are missing
// (npm ci, from the committed package-lock.json), builds them into out and
// loads them into a host.
func buildTwins(ctx context.Context, out string) error {
	if _, err := os.Stat(filepath.Join(twinProject, "node_modules")); err != nil {
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = twinProject
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm ci in %s: %v: %s", twinProject, err, b)
		}
	}
	cache := filepath.Join(out, "cache")
	var manifests []string
	outside, err := testutil.BuildScripts(twinProject, out, cache) // under -race: testutil.BuildScripts says why
	if err != nil {
		return err
	}
	if outside {
		if manifests, err = filepath.Glob(filepath.Join(out, "*.tool.json")); err != nil {
			return err
		}
	} else {
		arts, err := build.BuildScripts(ctx, twinProject, build.Options{Out: out})
		if err != nil {
			return err
		}
		for _, a := range arts {
			manifests = append(manifests, a.ManifestPath)
		}
	}
	// InitTimeout: compiling a bundle (zod included) under the race
	// detector took over the default 10 s on a loaded 2-core machine; the
	// default's job, stopping a payload that does not finish, is tested in
	// host/jshost, not here.
	h, err := jshost.New(&jshost.Options{CacheDir: cache, InitTimeout: 2 * time.Minute})
	if err != nil {
		return err
	}
	twins.host, twins.arts = h, map[string]*jshost.Artifact{}
	for _, m := range manifests {
		ja, err := h.LoadManifest(m)
		if err != nil {
			return err
		}
		twins.arts[ja.Manifest().Name] = ja
	}
	return nil
}

func loadTwin(name string) (tool.Attachable, error) {
	a, ok := twins.arts[name]
	if !ok {
		return nil, fmt.Errorf("examples/ts-tools has no tool named %q", name)
	}
	return a, nil
}

// both runs a test's cases natively, hosted and on the twin.
type both struct {
	envs  *toolstest.Envs
	twins *toolstest.Twins
}

func newBoth(t testing.TB, providers []kernel.Provider, opts *kernel.Options) *both {
	t.Helper()
	return &both{envs: harness.NewEnvs(t, providers, opts), twins: toolstest.NewTwins(t, providers, opts, loadTwin)}
}

func (b *both) Attach(t testing.TB, atts ...kernel.Attachment) map[toolstest.Mode]kernel.AttachReceipt {
	t.Helper()
	recs := b.envs.Attach(t, atts...)
	for m, r := range b.twins.Attach(t, atts...) {
		if m != toolstest.Native {
			recs[m] = r
		}
	}
	return recs
}

func (b *both) MustAttach(t testing.TB, atts ...kernel.Attachment) {
	t.Helper()
	b.envs.MustAttach(t, atts...)
	b.twins.MustAttach(t, atts...)
}

func (b *both) Run(t *testing.T, cases []toolstest.Case) {
	t.Helper()
	b.envs.Run(t, cases)
	t.Run("twin", func(t *testing.T) { b.twins.Run(t, cases) })
}

// TestTwinsBuilt: every Go example tool has its TypeScript twin.
func TestTwinsBuilt(t *testing.T) {
	for _, b := range harness.Built() {
		if _, ok := twins.arts[b.Manifest.Name]; !ok {
			t.Errorf("examples/ts-tools has no twin of %s", b.Manifest.Name)
		}
	}
	if a, ok := twins.arts["echo"]; !ok || a.Manifest().Runtime != tool.RuntimeJS {
		t.Errorf("no echo twin of runtime %s", tool.RuntimeJS)
	}
}
