package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
)

// TestBuildInspectRun drives the artifact commands as a user would:
// brain build, brain inspect, brain run (a value, an error outcome, bad
// usage), each with its exit code.
func TestBuildInspectRun(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hi there"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, stdout, stderr := run("build", "../../examples/tools/fsread", "-o", out)
	if code != 0 || !strings.HasPrefix(stdout, "fs.read\tsha256:") {
		t.Fatalf("build: %d %s %s", code, stdout, stderr)
	}
	artifact := filepath.Join(out, "fs.read.tool.json")
	if err := testutil.WarmCache(cache, artifact); err != nil { // under -race: testutil.WarmCache says why
		t.Fatal(err)
	}

	code, stdout, _ = run("inspect", artifact)
	if code != 0 || !strings.Contains(stdout, "identity verified: sha256:") || !strings.Contains(stdout, "brain_fs.read_file") {
		t.Fatalf("inspect: %d %s", code, stdout)
	}

	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"value", []string{"run", artifact, "--input", `{"path":"a.txt"}`, "--workspace", ws, "--cache", cache}, 0, `{"ok":true,"value":{"text":"hi there","bytes":8}}`},
		{"path escape", []string{"run", artifact, "--input", `{"path":"../a.txt"}`, "--workspace", ws, "--cache", cache}, 1, `"code":"path_escape"`},
		{"invalid input", []string{"run", artifact, "--input", `{"path":1}`, "--workspace", ws, "--cache", cache}, 1, `"code":"invalid_input"`},
		{"unknown binding", []string{"run", artifact, "--input", `{"path":"a.txt"}`, "--workspace", ws, "--cache", cache, "--binding", "token=x"}, 1, `binding \"token\" is not declared`},
		{"input not JSON", []string{"run", artifact, "--input", `{`}, 2, ""},
		{"no artifact", []string{"run"}, 2, ""},
		// A file named on the command line that does not load is the job
		// failing (1), not bad usage (2).
		{"missing artifact", []string{"run", filepath.Join(out, "nope.tool.json")}, 1, ""},
		{"bad grants file", []string{"run", artifact, "--grants", filepath.Join(out, "none.yaml")}, 1, ""},
	}
	// Compile the payload into the cache first, with a deadline for a cold
	// compile under -race on a loaded machine (a minute and more): every
	// case below is about the call, not about how fast wazero compiles.
	if code, stdout, stderr := run("run", artifact, "--input", `{"path":"a.txt"}`, "--workspace", ws, "--cache", cache, "--timeout", "10m"); code != 0 {
		t.Fatalf("warming the cache: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	t.Run("not_found once", func(t *testing.T) {
		// The message does not repeat the code the outcome already carries.
		code, stdout, stderr := run("run", artifact, "--input", `{"path":"notes.txt"}`, "--workspace", ws, "--cache", cache)
		want := `{"ok":false,"error":{"code":"not_found","message":"fs read_file: \"notes.txt\" does not exist"}}`
		if code != 1 || strings.TrimSpace(stdout) != want {
			t.Fatalf("exit %d\nstdout: %s\nwant    %s\nstderr: %s", code, stdout, want, stderr)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.out) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
		})
	}

	// An artifact as last month's brain built it — no runtime in its
	// manifest: ABI 1 — is refused by inspect and run, naming both
	// versions and what to do, before any call (its calls all failed
	// with "the result starts with 0x7b" before).
	old := t.TempDir()
	mj, _ := os.ReadFile(artifact)
	var manifest map[string]any
	if err := json.Unmarshal(mj, &manifest); err != nil {
		t.Fatal(err)
	}
	delete(manifest, "runtime")
	mj, _ = json.Marshal(manifest)
	wasm, _ := os.ReadFile(filepath.Join(out, "fs.read.wasm"))
	if err := os.WriteFile(filepath.Join(old, "fs.read.tool.json"), mj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "fs.read.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"inspect"}, {"run", "--workspace", ws, "--cache", cache}} {
		args := append([]string{cmd[0], filepath.Join(old, "fs.read.tool.json")}, cmd[1:]...)
		if code, _, stderr := run(args...); code != 1 || !strings.Contains(stderr, "names no runtime") || !strings.Contains(stderr, "wasm/2") || !strings.Contains(stderr, "rebuild it with `brain build`") {
			t.Fatalf("%s of an ABI 1 artifact: exit %d\n%s", cmd[0], code, stderr)
		}
	}

	// A tampered payload is refused by inspect and run.
	payload := filepath.Join(out, "fs.read.wasm")
	b, _ := os.ReadFile(payload)
	b[len(b)/2] ^= 1
	if err := os.WriteFile(payload, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run("inspect", artifact); code != 1 || !strings.Contains(stderr, "does not match its identity") {
		t.Fatalf("inspect of a tampered payload: %d %s", code, stderr)
	}
	if code, _, stderr := run("run", artifact, "--workspace", ws, "--cache", cache); code != 1 || !strings.Contains(stderr, "does not match its identity") {
		t.Fatalf("run of a tampered payload: %d %s", code, stderr)
	}
}

// TestArtifactStatePerSession: two MCP callers in two sessions of one
// brain serve call an artifact that keeps its last note in a package
// variable; bob's call never returns alice's note (it did when one pool
// of instances served every session).
func TestArtifactStatePerSession(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a cold guest build and compile under -race
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"build", "../../host/testdata/tools/memo", "-o", filepath.Join(dir, "artifacts")}, &stdout, &stderr); code != 0 {
		t.Fatalf("build: %d %s %s", code, stdout.String(), stderr.String())
	}
	t.Chdir(dir)
	if err := testutil.WarmCache(filepath.Join("data", "wazero"), filepath.Join("artifacts", "memo.tool.json")); err != nil { // brain serve's cache
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.MkdirAll("workspace", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("grants.yaml", []byte("workspace: "+wd+"/workspace\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("brain.yaml", []byte("grants: grants.yaml\nartifacts: artifacts\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", config: "brain.yaml", idle: time.Hour})
	// serve ends before the test does: t.Chdir's cleanup moves the whole
	// process back and the TempDir goes, under a serve still stopping.
	defer func() { cancel(); <-done }()
	model := tokenOf(t, "data", "model")
	call := func(sessionID, note string) string {
		t.Helper()
		cs := mcpSession(t, ctx, addr, model, sessionID)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memo", Arguments: map[string]any{"note": note}})
		if err != nil || res.IsError {
			t.Fatalf("memo in %s: %+v %v", sessionID, res, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	call("alice", "alice's secret")
	if got := call("bob", "bob's note"); strings.Contains(got, "alice") {
		t.Fatalf("bob's call returned %s", got)
	}
	if got := call("alice", "again"); !strings.Contains(got, "alice's secret") {
		t.Fatalf("alice's own next call returned %s, want her note", got)
	}
}
