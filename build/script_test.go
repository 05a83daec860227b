package build_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
)

// tsProject is the TypeScript project the golden test builds.
const tsProject = "../examples/ts-tools"

// golden is the committed artifact of examples/ts-tools/src/echo.tool.ts;
// the JavaScript host's benchmarks run it.
const golden = "../host/jshost/testdata"

// npmCI installs the project's dependencies when they are missing, from
// its committed package-lock.json.
func npmCI(t testing.TB, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v: %s", dir, err, out)
	}
}

// TestBuildScriptsGolden builds examples/ts-tools twice: the two builds
// give identical bytes (and so identities), echo's artifact is the golden
// one, and it runs end to end on a hosting environment.
func TestBuildScriptsGolden(t *testing.T) {
	testutil.SkipUnderRace(t)
	npmCI(t, tsProject)
	ctx := context.Background()
	dirs := []string{t.TempDir(), t.TempDir()}
	var ids [2]map[string]string
	for i, d := range dirs {
		arts, err := build.BuildScripts(ctx, tsProject, build.Options{Out: d})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = map[string]string{}
		for _, a := range arts {
			ids[i][a.Manifest.Name] = a.Manifest.Payload
			if len(a.Unused) > 0 {
				t.Errorf("%s declares handles its code never names: %v", a.Manifest.Name, a.Unused)
			}
		}
	}
	if len(ids[0]) != 8 {
		t.Fatalf("built %d tools, want 8 (the seven examples and echo): %v", len(ids[0]), ids[0])
	}
	files, _ := filepath.Glob(filepath.Join(dirs[0], "*"))
	for _, f := range files {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(dirs[1], filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds", filepath.Base(f))
		}
	}
	for _, name := range []string{"echo.tool.json", "echo.mjs"} {
		got, _ := os.ReadFile(filepath.Join(dirs[0], name))
		if *update {
			if err := os.WriteFile(filepath.Join(golden, name), got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(filepath.Join(golden, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (go test ./build -run Golden -update rewrites it):\n%s", name, golden, got)
		}
	}
	var m map[string]any
	b, _ := os.ReadFile(filepath.Join(golden, "echo.tool.json"))
	if err := json.Unmarshal(b, &m); err != nil || m["runtime"] != "js/1" || m["hosting"] != "provisioned" {
		t.Fatalf("golden manifest %s: %v", b, err)
	}
	// End to end: the golden artifact on a hosting environment.
	h, err := jshost.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.LoadManifest(filepath.Join(golden, "echo.tool.json"))
	if err != nil {
		t.Fatal(err)
	}
	env := kernel.New(nil)
	defer env.Close()
	env.Setup(ctx)
	if rec := env.Attach(ctx, kernel.Attachment{Tool: a}); !rec.OK() {
		t.Fatalf("attach: %+v", rec.Failures)
	}
	out := env.Invoke(ctx, "echo", kernel.Call{Input: json.RawMessage(`{"message":"héllo"}`)})
	if out.Err != nil || string(out.Value) != `{"message":"héllo"}` {
		t.Fatalf("invoke: %s %+v", out.Value, out.Err)
	}
	out = env.Invoke(ctx, "echo", kernel.Call{Input: json.RawMessage(`{"message":1}`)})
	if out.Err == nil || out.Err.Code != "invalid_input" {
		t.Fatalf("invalid input: %s %+v", out.Value, out.Err)
	}
}

// writeProject writes a script project of files (name → content) with an
// empty package.json.
func writeProject(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["package.json"] = `{"name": "t", "private": true, "type": "module"}`
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// handWritten is a tool made without the SDK, as tool() makes one.
func handWritten(name, requires, run string) string {
	return `const t = {
  name: ` + name + `, description: "d", requires: ` + requires + `, run: ` + run + `,
  describe() { return { name: this.name, description: "d", input_schema: { type: "object" }, requires: this.requires, binding_names: [] }; },
};
const r = globalThis[Symbol.for("brain.register")];
if (typeof r === "function") r(t);
export default t;
`
}

// TestUnusedHandles: build warns when a declared handle is never named by
// the tool's own code — its name in requires (a string), in a comment or
// in a dependency does not count — and never fails for it.
func TestUnusedHandles(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"used.tool.js":   handWritten(`"t.used"`, `["fs", "exec"]`, `async ({ handles }) => { const { exec } = handles; await handles.fs.readFile("x"); return exec; }`),
		"unused.tool.js": handWritten(`"t.unused"`, `["fs", "net"]`, `() => { /* handles.fs is not used */ return "fs net" }`),
		"lib/dep.js":     `export const fs = 1;`,
	})
	var logs bytes.Buffer
	arts, err := build.BuildScripts(context.Background(), dir, build.Options{Out: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range arts {
		got[a.Manifest.Name] = fmt.Sprint(a.Unused)
	}
	if got["t.used"] != "[]" || got["t.unused"] != "[fs net]" {
		t.Fatalf("unused handles %v, want none for t.used and fs,net for t.unused", got)
	}
	if !strings.Contains(logs.String(), "declared handle is never used") {
		t.Fatalf("no warning logged: %s", logs.String())
	}
}

// TestBuildScriptsErrors: what is wrong with a project is an error naming
// it.
func TestBuildScriptsErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		msg   string
	}{
		{name: "no tool file", files: map[string]string{"index.js": "export default 1"}, msg: "no tool file"},
		{name: "syntax error", files: map[string]string{"a.tool.js": "export default {;"}, msg: "esbuild: a.tool.js:1:"},
		{name: "no tool defined", files: map[string]string{"a.tool.js": "export default 1"}, msg: "defined no tool"},
		{name: "throws at load", files: map[string]string{"a.tool.js": `throw new Error("at load")`}, msg: "at load"},
		{name: "unknown handle", files: map[string]string{"a.tool.js": handWritten(`"t.a"`, `["disk"]`, `() => 1`)}, msg: `unknown handle "disk"`},
		{name: "two files, one name", files: map[string]string{"a.tool.js": handWritten(`"t.same"`, `[]`, `() => 1`), "b.tool.js": handWritten(`"t.same"`, `[]`, `() => 2`)}, msg: `b.tool.js: the tool "t.same" is also defined by `},
		{name: "a good tool, then a bad one", files: map[string]string{"a.tool.js": handWritten(`"t.a"`, `[]`, `() => 1`), "b.tool.js": `throw new Error("at load")`}, msg: "at load"},
		{name: "loops forever", files: map[string]string{"a.tool.js": `for (;;) {}`}, msg: "deadline"},
		{name: "top-level await never settles", files: map[string]string{"a.tool.js": `await new Promise(() => {});`}, msg: "evaluate the bundle: the module's top-level await never settled"},
		{name: "top-level await never settles, tool defined", files: map[string]string{"a.tool.js": handWritten(`"t.a"`, `[]`, `() => 1`) + `await new Promise(() => {});`}, msg: "top-level await never settled"},
		{name: "top-level await rejects", files: map[string]string{"a.tool.js": `await Promise.reject(new Error("later"));`}, msg: "evaluate the bundle: Error: later"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeProject(t, tc.files)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			out := t.TempDir()
			_, err := build.BuildScripts(ctx, dir, build.Options{Out: out})
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("BuildScripts = %v, want an error containing %q", err, tc.msg)
			}
			// Every tool is checked before anything is written.
			if written := filesUnder(t, out); len(written) > 0 {
				t.Fatalf("a failed build wrote %v", written)
			}
		})
	}
	if _, err := build.BuildScripts(context.Background(), t.TempDir(), build.Options{Out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "has no package.json") {
		t.Fatalf("a directory without package.json: %v", err)
	}
}

// filesUnder lists the files (and links) under dir, relative to it.
func filesUnder(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildScriptsRefusesNames: a tool's name is the base of its files in
// the output directory, so a name that is not a capability name or cannot
// name a file there is refused, naming the tool's file and the rule, and
// nothing is written, in the output directory or outside it.
func TestBuildScriptsRefusesNames(t *testing.T) {
	tests := []struct {
		name, tool, want string
	}{
		{"parent", `"../../escaped"`, `must not contain '/' or '\'`},
		{"slash", `"a/b"`, `must not contain '/' or '\'`},
		{"backslash", `"a\\b"`, `must not contain '/' or '\'`},
		{"over 256 bytes", `"x".repeat(300)`, "300 bytes, more than 256"},
		{"over 245 bytes", `"x".repeat(250)`, "250 bytes, more than the 245"},
		{"NUL", `"nul\u0000x"`, "must not contain spaces or control characters"},
		{"space", `"x y"`, "must not contain spaces or control characters"},
		{"newline", `"fs.read\n"`, "must not contain spaces or control characters"},
		{"hidden", `".hidden"`, "must not start with '.'"},
		{"dot dot", `".."`, "must not start with '.'"},
		{"flag", `"-rf"`, "must not start with '-'"},
		{"empty", `""`, "must not be empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{
				"good.tool.js":    handWritten(`"t.good"`, `[]`, `() => 1`),
				"src/bad.tool.js": handWritten(tc.tool, `[]`, `() => 1`),
			})
			root := t.TempDir()
			_, err := build.BuildScripts(context.Background(), dir, build.Options{Out: filepath.Join(root, "a", "b", "out")})
			if err == nil {
				t.Fatal("BuildScripts succeeded")
			}
			for _, want := range []string{filepath.Join(dir, "src", "bad.tool.js") + ": the tool's name", tc.want, "not starting with '.' or '-'"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("BuildScripts = %v, want an error containing %q", err, want)
				}
			}
			if written := filesUnder(t, root); len(written) > 0 {
				t.Errorf("a refused build wrote %v under %s", written, root)
			}
		})
	}
}

// TestBuildScriptsTooLarge: a bundle over the 16 MiB every JavaScript host
// refuses to load is refused by the build, which writes nothing.
func TestBuildScriptsTooLarge(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"big.js":        `export const big = "` + strings.Repeat("a", jshost.MaxPayloadBytes) + `";`,
		"huge.tool.js":  `import { big } from "./big.js";` + "\n" + handWritten(`"t.huge"`, `[]`, `() => big.length`),
		"small.tool.js": handWritten(`"t.small"`, `[]`, `() => 1`),
	})
	out := t.TempDir()
	_, err := build.BuildScripts(context.Background(), dir, build.Options{Out: out})
	if err == nil {
		t.Fatal("BuildScripts succeeded")
	}
	for _, want := range []string{"huge.tool.js: the bundle has", "more than the 16777216 (16 MiB) a JavaScript host loads"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("BuildScripts = %v, want an error containing %q", err, want)
		}
	}
	if written := filesUnder(t, out); len(written) > 0 {
		t.Errorf("a refused build wrote %v", written)
	}
}

// TestBuildScriptsReplacesLinks: a symbolic link at an artifact's path in
// the output directory (a cloned project may ship one) is replaced, never
// written through.
func TestBuildScriptsReplacesLinks(t *testing.T) {
	dir := writeProject(t, map[string]string{"hello.tool.js": handWritten(`"hello"`, `[]`, `() => "hello"`)})
	out, outside := t.TempDir(), t.TempDir()
	for _, name := range []string{"hello.mjs", "hello.tool.json"} {
		victim := filepath.Join(outside, name)
		if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := build.BuildScripts(context.Background(), dir, build.Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hello.mjs", "hello.tool.json"} {
		if b, err := os.ReadFile(filepath.Join(outside, name)); err != nil || string(b) != "keep" {
			t.Errorf("%s outside the output directory = %q, %v: written through a link", name, b, err)
		}
		if fi, err := os.Lstat(filepath.Join(out, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s in the output directory: %v, %v, want a regular file", name, fi, err)
		}
	}
	if _, _, err := jshost.ReadArtifact(filepath.Join(out, "hello.tool.json")); err != nil {
		t.Errorf("the artifact does not load: %v", err)
	}
	if written := filesUnder(t, out); len(written) != 2 {
		t.Errorf("output directory holds %v, want the two files (no temporary file left)", written)
	}
}

// ExampleBuildScripts builds a JavaScript project of one tool (written by
// hand, as @brainrt/sdk's tool() makes one, so that it needs no npm
// packages) into its artifact.
func ExampleBuildScripts() {
	dir, _ := os.MkdirTemp("", "brain-example-")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type": "module"}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "hello.tool.js"), []byte(handWritten(`"hello"`, `[]`, `() => "hello"`)), 0o644)
	arts, err := build.BuildScripts(context.Background(), dir, build.Options{Out: filepath.Join(dir, "out")})
	if err != nil {
		panic(err)
	}
	for _, a := range arts {
		fmt.Println(a.Manifest.Name, a.Manifest.Runtime, filepath.Base(a.ManifestPath), filepath.Base(a.PayloadPath))
	}
	// Output:
	// hello js/1 hello.tool.json hello.mjs
}

// sdkProject writes a script project of files (name → content) whose
// node_modules is examples/ts-tools', which has @brainrt/sdk and zod.
func sdkProject(t testing.TB, files map[string]string) string {
	t.Helper()
	npmCI(t, tsProject)
	nm, err := filepath.Abs(filepath.Join(tsProject, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	dir := writeProject(t, files)
	if err := os.Symlink(nm, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBuildSDKSchemaErrors: a schema tool() cannot convert is named as
// tool()'s, with what to do — not defineCapability's (the client's, whose
// inputSchema option tool() does not have), and not zod's converter's
// error about another vendor's schema ("cannot read property 'def' of
// undefined").
func TestBuildSDKSchemaErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{name: "a Standard Schema with no JSON Schema form", src: `import { tool } from "@brainrt/sdk";
const S = { "~standard": { version: 1, vendor: "custom", validate: (v) => ({ value: v }) } };
export default tool({ name: "t.custom", description: "d", input: S, requires: [], run: () => 1 });
`, want: []string{"tool() t.custom: the custom input schema cannot convert itself to JSON Schema", "nor can zod's z.toJSONSchema", "give input a zod 4 schema"}},
		{name: "a zod schema with no JSON Schema form", src: `import { z } from "zod";
import { tool } from "@brainrt/sdk";
export default tool({ name: "t.date", description: "d", input: z.object({ d: z.date() }), requires: [], run: () => 1 });
`, want: []string{"tool() t.date: input schema has no JSON Schema form"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := sdkProject(t, map[string]string{"a.tool.js": tc.src})
			_, err := build.BuildScripts(context.Background(), dir, build.Options{Out: t.TempDir()})
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant it to contain %q", err, w)
				}
			}
			for _, bad := range []string{"defineCapability", "inputSchema", "'def'"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("%v\nsays %q", err, bad)
				}
			}
		})
	}
}

// TestSDKUTF8Encode: the SDK's utf8Encode of 1.5 MB fits a realm of the
// default 64 MiB (it built a number[] of about 16 bytes a byte, and ran
// out of memory), and encodes as UTF-8, a lone surrogate as U+FFFD.
func TestSDKUTF8Encode(t *testing.T) {
	ctx := context.Background()
	dir := sdkProject(t, map[string]string{"u.tool.js": `import { tool, utf8Encode, utf8Decode } from "@brainrt/sdk";
export default tool({ name: "t.utf8", description: "d", requires: [],
  input: { "~standard": { version: 1, vendor: "t", validate: (v) => ({ value: v }), jsonSchema: { input: () => ({ type: "object" }), output: () => ({ type: "object" }) } } },
  run() {
    const big = utf8Encode("é".repeat(750000));
    const b = utf8Encode("a\u00e9\u20ac\ud83d\ude00\ud800z");
    return { big: big.length, bytes: Array.from(b), back: utf8Decode(b) };
  } });
`})
	out := t.TempDir()
	arts, err := build.BuildScripts(ctx, dir, build.Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	h, err := jshost.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.LoadManifest(arts[0].ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	env := kernel.New(nil)
	defer env.Close()
	env.Setup(ctx)
	if rec := env.Attach(ctx, kernel.Attachment{Tool: a}); !rec.OK() {
		t.Fatalf("attach: %+v", rec.Failures)
	}
	got := env.Invoke(ctx, "t.utf8", kernel.Call{Input: json.RawMessage(`{}`)})
	want := `{"big":1500000,"bytes":[97,195,169,226,130,172,240,159,152,128,239,191,189,122],"back":"aé€😀` + "\uFFFD" + `z"}`
	if got.Err != nil || string(got.Value) != want {
		t.Fatalf("invoke: %s %+v, want %s", got.Value, got.Err, want)
	}
}

// TestNonObjectInputWarns: build warns (never fails) when a tool's input
// schema is not an object, which MCP clients can never call.
func TestNonObjectInputWarns(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"s.tool.js": `const t = { name: "t.str", description: "d", requires: [], run: (c, s) => s,
  describe() { return { name: "t.str", description: "d", input_schema: { type: "string" }, requires: [], binding_names: [] }; } };
globalThis[Symbol.for("brain.register")](t);
export default t;
`,
		"o.tool.js": handWritten(`"t.obj"`, `[]`, `() => 1`),
	})
	var logs bytes.Buffer
	if _, err := build.BuildScripts(context.Background(), dir, build.Options{Out: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "the input schema is not an object: MCP requires") || !strings.Contains(got, `tool=t.str type="\"string\""`) || strings.Contains(got, "tool=t.obj") {
		t.Fatalf("logs: %s", got)
	}
}
