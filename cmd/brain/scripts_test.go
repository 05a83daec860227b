package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptArtifacts: brain build takes a JavaScript project, and brain
// inspect and brain run take the JavaScript artifact it writes, choosing
// the host by the manifest's runtime.
func TestScriptArtifacts(t *testing.T) {
	ctx := context.Background()
	proj := t.TempDir()
	// A tool as @brainrt/sdk's tool() makes one, written by hand so that
	// the test needs no npm packages.
	files := map[string]string{
		"package.json": `{"name": "t", "private": true, "type": "module"}`,
		"read.tool.js": `const t = {
  name: "t.read", description: "Read a file.", requires: ["fs"],
  async run({ handles }, { path }) { const b = await handles.fs.readFile(path); return { bytes: b.length }; },
  describe() { return { name: "t.read", description: "Read a file.", requires: ["fs"], binding_names: [],
    input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } }; },
};
const r = globalThis[Symbol.for("brain.register")];
if (typeof r === "function") r(t);
export default t;
`,
	}
	out, stdout, stderr := buildScripts(t, proj, files)
	manifest := filepath.Join(out, "t.read.tool.json")
	if !strings.Contains(stdout.String(), "t.read\tsha256:") {
		t.Fatalf("build printed %q", stdout.String())
	}
	stdout.Reset()
	if code := run(ctx, []string{"inspect", manifest}, stdout, stderr); code != 0 || !strings.Contains(stdout.String(), `"runtime": "js/1"`) || !strings.Contains(stdout.String(), "handles (runtime js/1):\n  fs") {
		t.Fatalf("inspect: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := run(ctx, []string{"run", manifest, "--input", `{"path":"a.txt"}`, "--workspace", ws, "--cache", t.TempDir()}, stdout, stderr); code != 0 || strings.TrimSpace(stdout.String()) != `{"ok":true,"value":{"bytes":5}}` {
		t.Fatalf("run: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run(ctx, []string{"run", manifest, "--input", `{"path":"../x"}`, "--workspace", ws, "--cache", t.TempDir()}, stdout, stderr); code != 1 || !strings.Contains(stdout.String(), `"code":"path_escape"`) {
		t.Fatalf("run an escape: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	// A payload changed after the build is refused before it runs.
	if err := os.WriteFile(filepath.Join(out, "t.read.mjs"), []byte("export default 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(ctx, []string{"run", manifest, "--input", `{"path":"a.txt"}`, "--workspace", ws}, stdout, stderr); code != 1 || !strings.Contains(stderr.String(), "does not match its identity") {
		t.Fatalf("run a changed payload: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
}

// TestRunPrintsWithoutHTMLEscapes: brain run prints the outcome's JSON
// with "<", ">" and "&" as they are, not as \u003c, \u003e and \u0026.
func TestRunPrintsWithoutHTMLEscapes(t *testing.T) {
	ctx := context.Background()
	proj := t.TempDir()
	files := map[string]string{
		"package.json": `{"name": "t", "private": true, "type": "module"}`,
		"html.tool.js": `const t = {
  name: "t.html", description: "d", requires: [],
  run() { return { s: "<a href=\"x?a=1&b=2\">" }; },
  describe() { return { name: "t.html", description: "d", requires: [], binding_names: [], input_schema: { type: "object" } }; },
};
globalThis[Symbol.for("brain.register")](t);
export default t;
`,
	}
	out, stdout, stderr := buildScripts(t, proj, files)
	stdout.Reset()
	if code := run(ctx, []string{"run", filepath.Join(out, "t.html.tool.json"), "--cache", t.TempDir()}, stdout, stderr); code != 0 {
		t.Fatalf("run: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	if want := `{"ok":true,"value":{"s":"<a href=\"x?a=1&b=2\">"}}` + "\n"; stdout.String() != want {
		t.Fatalf("run printed %s, want %s", stdout.String(), want)
	}
}

// buildScripts writes files into the project directory proj and runs
// brain build on it, failing the test unless it builds; it returns the
// output directory and what build printed.
func buildScripts(t *testing.T, proj string, files map[string]string) (out string, stdout, stderr *bytes.Buffer) {
	t.Helper()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out = t.TempDir()
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	if code := run(context.Background(), []string{"build", proj, "-o", out}, stdout, stderr); code != 0 {
		t.Fatalf("build: exit %d, %s %s", code, stdout.String(), stderr.String())
	}
	return out, stdout, stderr
}
