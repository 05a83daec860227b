package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scriptTool is a tool as @brainrt/sdk's tool() makes one, written by hand
// so that a test needs no npm packages.
func scriptTool(name string) string {
	return `const t = {
  name: ` + name + `, description: "d", requires: [], run: () => 1,
  describe() { return { name: this.name, description: "d", input_schema: { type: "object" }, requires: [], binding_names: [] }; },
};
const r = globalThis[Symbol.for("brain.register")];
if (typeof r === "function") r(t);
export default t;
`
}

// writeScriptProject writes a script project of files (name → content).
func writeScriptProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["package.json"] = `{"name": "t", "private": true, "type": "module"}`
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBuildHelp: brain build -h names both kinds of tool and both payloads.
func TestBuildHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"build", "-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"<name>.wasm", "<name>.mjs", "<name>.tool.json", "Go tool package", "TypeScript", "*.tool.ts", "package.json"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("brain build -h lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestBuildConflictWritesNothing: two projects defining one tool fail the
// build, which writes neither project's artifacts; a name that is a path
// fails it too, naming the file, and nothing is written outside -o.
func TestBuildConflictWritesNothing(t *testing.T) {
	ctx := context.Background()
	a := writeScriptProject(t, map[string]string{"one.tool.js": scriptTool(`"same"`)})
	b := writeScriptProject(t, map[string]string{"two.tool.js": scriptTool(`"same"`)})
	c := writeScriptProject(t, map[string]string{"esc.tool.js": scriptTool(`"../escaped"`)})
	tests := []struct {
		name     string
		projects []string
		want     string
	}{
		{"two projects, one name", []string{a, b}, `build ` + filepath.Join(b, "two.tool.js") + `: the tool "same" is also defined by ` + filepath.Join(a, "one.tool.js")},
		{"a path as the name", []string{a, c}, `build ` + filepath.Join(c, "esc.tool.js") + `: the tool's name "../escaped" is not valid`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "out")
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{"build", "-o", out}, tc.projects...), &stdout, &stderr)
			if code != exitFail || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitFail, tc.want)
			}
			if entries, err := os.ReadDir(root); err != nil || len(entries) > 0 {
				t.Errorf("a failed build wrote %v (%v)", entries, err)
			}
		})
	}
}

// TestRunRefusesBadName: an artifact whose manifest names a tool that is
// not a capability name (made by hand, or by an older brain build) does
// not load.
func TestRunRefusesBadName(t *testing.T) {
	dir := t.TempDir()
	payload := []byte(scriptTool(`"x y"`))
	sum := sha256.Sum256(payload)
	manifest := `{"format": "tool/v1", "name": "x y", "description": "d", "input_schema": {"type": "object"},
  "requires": [], "binding_names": [], "hosting": "provisioned", "runtime": "js/1", "payload": "sha256:` + hex.EncodeToString(sum[:]) + `"}`
	if err := os.WriteFile(filepath.Join(dir, "x y.mjs"), payload, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x y.tool.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", filepath.Join(dir, "x y.tool.json"), "--workspace", dir, "--cache", t.TempDir()}, &stdout, &stderr)
	if want := `manifest name "x y" is not a capability name: must not contain spaces`; code != exitFail || !strings.Contains(stderr.String(), want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout.String(), stderr.String(), exitFail, want)
	}
}
