package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
