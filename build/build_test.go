package build_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/tool"
)

var update = flag.Bool("update", false, "rewrite the golden manifest")

func buildTools(t *testing.T, logger *slog.Logger, patterns ...string) (string, []build.Artifact) {
	t.Helper()
	out := t.TempDir()
	arts, err := build.Build(context.Background(), patterns, build.Options{Out: out, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return out, arts
}

// TestManifestGolden builds the fs.read example, compares its manifest with
// the golden file (the payload identity aside, which depends on the Go
// toolchain), checks the identity is the payload's sha-256, and runs the
// artifact end to end in a hosting environment.
func TestManifestGolden(t *testing.T) {
	out, arts := buildTools(t, nil, "../examples/tools/fsread")
	if len(arts) != 1 {
		t.Fatalf("built %d artifacts", len(arts))
	}
	a := arts[0]
	if a.ManifestPath != filepath.Join(out, "fs.read.tool.json") || a.PayloadPath != filepath.Join(out, "fs.read.wasm") {
		t.Errorf("paths = %s, %s", a.ManifestPath, a.PayloadPath)
	}
	raw, err := os.ReadFile(a.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := os.ReadFile(a.PayloadPath)
	if err != nil {
		t.Fatal(err)
	}
	var m tool.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Payload != host.Identity(payload) {
		t.Fatalf("manifest payload %s is not the payload's identity %s", m.Payload, host.Identity(payload))
	}
	normalized := bytes.Replace(raw, []byte(m.Payload), []byte("sha256:<payload>"), 1)
	golden := filepath.Join("testdata", "fs.read.tool.json")
	if *update {
		if err := os.WriteFile(golden, normalized, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(normalized, want) {
		t.Errorf("manifest differs from %s:\n got: %s\nwant: %s", golden, normalized, want)
	}
	if !reflect.DeepEqual(a.Imports[:3], []string{"brain.progress", "brain.response", "brain_fs.read_file"}) || len(a.Unused) != 0 {
		t.Errorf("imports = %v, unused = %v", a.Imports, a.Unused)
	}

	// End to end: host the artifact and read a file through it.
	cache := t.TempDir()
	if err := testutil.WarmCache(cache, a.ManifestPath); err != nil { // under -race: testutil.WarmCache says why
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), &host.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	art, err := h.LoadManifest(a.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("artifact says hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := kernel.New(nil)
	_ = e.Provide(kernel.Provider{Kind: handle.KindFS, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		fs, err := fsroot.New(fsroot.Grants{Root: root})
		if err != nil {
			return nil, err
		}
		return kernel.Static(fs, fs.Close), nil
	}})
	e.Setup(context.Background())
	defer e.Close()
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: art}); !rec.OK() {
		t.Fatal(rec.Failures)
	}
	o := e.Invoke(context.Background(), "fs.read", kernel.Call{Input: json.RawMessage(`{"path":"a.txt"}`)})
	if !o.IsOK() || string(o.Value) != `{"text":"artifact says hi","bytes":16}` {
		t.Fatalf("outcome = %+v %s", o.Err, o.Value)
	}
}

// TestReproducible: building the same source twice gives the same bytes.
func TestReproducible(t *testing.T) {
	_, a1 := buildTools(t, nil, "../host/testdata/tools/echo")
	_, a2 := buildTools(t, nil, "../host/testdata/tools/echo")
	for _, pair := range [][2]string{{a1[0].PayloadPath, a2[0].PayloadPath}, {a1[0].ManifestPath, a2[0].ManifestPath}} {
		b1, _ := os.ReadFile(pair[0])
		b2, _ := os.ReadFile(pair[1])
		if len(b1) == 0 || !bytes.Equal(b1, b2) {
			t.Errorf("%s and %s differ", pair[0], pair[1])
		}
	}
}

// TestUnusedHandleWarns: a declared handle the tool's code never uses is a
// warning, not a failure; the payload's imports decide.
func TestUnusedHandleWarns(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	_, arts := buildTools(t, logger, "../host/testdata/tools/runner")
	a := arts[0]
	if !reflect.DeepEqual(a.Unused, []handle.Kind{handle.KindNet}) {
		t.Errorf("unused = %v, want [net]", a.Unused)
	}
	if !strings.Contains(logs.String(), "declared handle is never used") || !strings.Contains(logs.String(), "handle=net") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	if !reflect.DeepEqual(a.Manifest.Requires, []handle.Kind{handle.KindExec, handle.KindNet}) {
		t.Errorf("requires = %v: the warning must not change the manifest", a.Manifest.Requires)
	}
	// Bindings appear by name and schema only: a build has no values.
	if got := string(a.Manifest.BindingSchemas["program"]); got != `{"type":"string"}` {
		t.Errorf("binding schema = %s", got)
	}
}

func TestNoToolPackage(t *testing.T) {
	_, err := build.Build(context.Background(), []string{"../protocol"}, build.Options{Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no tool package matches") {
		t.Fatalf("err = %v", err)
	}
	_, err = build.Build(context.Background(), []string{"../nope"}, build.Options{Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "../nope does not exist") {
		t.Fatalf("err = %v", err)
	}
}

// TestImportsListedOnce: a Go payload imports wasi_snapshot_preview1.fd_write
// twice (the runtime and package syscall each declare it); Imports, and so
// brain inspect, lists every host function once.
func TestImportsListedOnce(t *testing.T) {
	_, arts := buildTools(t, nil, "../examples/tools/fsread")
	seen := map[string]bool{}
	for _, imp := range arts[0].Imports {
		if seen[imp] {
			t.Errorf("%s listed twice in %v", imp, arts[0].Imports)
		}
		seen[imp] = true
	}
	if !seen["wasi_snapshot_preview1.fd_write"] {
		t.Errorf("imports %v lack wasi_snapshot_preview1.fd_write", arts[0].Imports)
	}
}

// TestSameToolName: two packages whose tools have one name would write the
// same files (the builds run at once); the build fails naming both, and
// writes nothing, not even the first one's files.
func TestSameToolName(t *testing.T) {
	out := t.TempDir()
	_, err := build.Build(context.Background(), []string{"../host/testdata/tools/echo", "./testdata/samename/echo2"}, build.Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), `the tool "echo" is also defined by`) || !strings.Contains(err.Error(), "must be unique") {
		t.Fatalf("got %v, want the two packages' shared name refused", err)
	}
	if written := filesUnder(t, out); len(written) > 0 {
		t.Errorf("a refused build wrote %v", written)
	}
}

// TestSameToolNameAcrossKinds: a TypeScript tool and a Go tool of one name
// would write the same <name>.tool.json; one build of both refuses them
// before writing anything.
func TestSameToolNameAcrossKinds(t *testing.T) {
	dir := writeProject(t, map[string]string{"echo.tool.js": handWritten(`"echo"`, `[]`, `() => 1`)})
	out := t.TempDir()
	_, err := build.Build(context.Background(), []string{dir, "../host/testdata/tools/echo"}, build.Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), `the tool "echo" is also defined by `+filepath.Join(dir, "echo.tool.js")) {
		t.Fatalf("got %v, want the shared name refused", err)
	}
	if written := filesUnder(t, out); len(written) > 0 {
		t.Errorf("a refused build wrote %v", written)
	}
}

// TestProjectNamedTwice: a project named twice in one build (its path,
// and the same with a trailing slash) is built once — it was refused as
// clashing with itself.
func TestProjectNamedTwice(t *testing.T) {
	dir := writeProject(t, map[string]string{"echo.tool.js": handWritten(`"echo"`, `[]`, `() => 1`)})
	arts, err := build.Build(context.Background(), []string{dir, dir + string(filepath.Separator)}, build.Options{Out: t.TempDir()})
	if err != nil || len(arts) != 1 {
		t.Fatalf("got %d artifacts, %v; want the one tool", len(arts), err)
	}
}

// TestBadToolName: a Go tool named "../escaped" is refused, naming the
// file that declares it and the rule, before its payload is compiled; and
// nothing is written, in the output directory or beside it.
func TestBadToolName(t *testing.T) {
	root := t.TempDir()
	_, err := build.Build(context.Background(), []string{"./testdata/badname"}, build.Options{Out: filepath.Join(root, "out")})
	if err == nil {
		t.Fatal("Build succeeded")
	}
	for _, want := range []string{filepath.Join("testdata", "badname", "badname.go") + `: the tool's name "../escaped" is not valid: must not contain '/'`, "not starting with '.' or '-'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Build = %v, want an error containing %q", err, want)
		}
	}
	if written := filesUnder(t, root); len(written) > 0 {
		t.Errorf("a refused build wrote %v under %s", written, root)
	}
}

// TestBuildPathErrors: a pattern naming a path brain build cannot take —
// missing, a script file, a directory of scripts below its project's
// package.json — is an error saying so and naming the project directory,
// not go list's "go.mod file not found".
func TestBuildPathErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"proj/package.json":         `{"name": "t", "private": true, "type": "module"}`,
		"proj/src/a.tool.ts":        `export default 1;`,
		"loose/b.tool.ts":           `export default 1;`,
		"proj/src/lib/helper.ts":    `export const x = 1;`,
		"proj/src/lib/deeper/c.mts": `export const y = 1;`,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proj := filepath.Join(dir, "proj")
	tests := []struct {
		pattern string
		want    []string
	}{
		{"./nonexist", []string{"build: ./nonexist does not exist"}},
		{"nothere.tool.ts", []string{"build: nothere.tool.ts does not exist"}},
		{"./proj/src/a.tool.ts", []string{"./proj/src/a.tool.ts is a file", "the one with its package.json", "this file's project is " + proj}},
		{"proj/src/a.tool.ts", []string{"proj/src/a.tool.ts is a file", "this file's project is " + proj}},
		{"./proj/src", []string{"./proj/src has no package.json", "the project of its scripts is " + proj}},
		{"./proj/src/lib/deeper", []string{"the project of its scripts is " + proj}},
		{"./loose/b.tool.ts", []string{"./loose/b.tool.ts is a file, in no directory with a package.json"}},
		{"./loose", []string{"./loose has TypeScript or JavaScript files but no package.json"}},
		// The re-probe's: a directory without ./ (go list read it as an
		// import path), the package.json itself, an empty directory.
		{"proj/src", []string{"proj/src has no package.json", "the project of its scripts is " + proj}},
		{"./proj/package.json", []string{"./proj/package.json is a project's package.json: give its directory, proj"}},
		{"./empty", []string{"./empty holds no Go files, no package.json and no TypeScript or JavaScript files"}},
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			_, err := build.Build(context.Background(), []string{tc.pattern}, build.Options{Dir: dir, Out: t.TempDir()})
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "go.mod") {
				t.Errorf("%v: go list's error", err)
			}
		})
	}
}
