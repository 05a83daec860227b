package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/tool"
)

// artifacts is where TestMain builds the test tools, once; cacheDir is the
// compilation cache the tests share, so that each payload compiles once.
var artifacts, cacheDir string

var testTools = []string{"echo", "behave", "escape", "initpanic", "memo", "runner", "stall"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "brain-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var patterns []string
	for _, t := range testTools {
		patterns = append(patterns, "./testdata/tools/"+t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	_, err = build.Build(ctx, patterns, build.Options{Out: dir})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building test tools:", err)
		os.Exit(1)
	}
	artifacts = dir
	cacheDir = filepath.Join(dir, "cache")
	var manifests []string
	for _, t := range testTools {
		manifests = append(manifests, filepath.Join(dir, t+".tool.json"))
	}
	// Under the race detector the shared cache is filled by a process
	// without it (testutil.WarmCache says why); the tests that compile on
	// purpose (TestCompileDeadline, the cache's own tests, the
	// instrumentation's) use payloads or caches of their own.
	if err := testutil.WarmCache(cacheDir, manifests...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newHost returns a host whose cache is a test temp dir.
func newHost(t testing.TB, opts *host.Options) *host.Host {
	t.Helper()
	o := host.Options{CacheDir: cacheDir}
	if opts != nil {
		o = *opts
		if o.CacheDir == "" {
			o.CacheDir = cacheDir
		}
	}
	h, err := host.New(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

func load(t testing.TB, h *host.Host, name string) *host.Artifact {
	t.Helper()
	a, err := h.LoadManifest(filepath.Join(artifacts, name+".tool.json"))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newEnv returns a set-up environment providing fs over a temp workspace
// holding notes.txt, and a file outside it, secret.txt.
func newEnv(t testing.TB, opts *kernel.Options) *kernel.Environment {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "workspace")
	must(t, os.Mkdir(root, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hello from the workspace"), 0o644))
	must(t, os.WriteFile(filepath.Join(base, "secret.txt"), []byte("outside"), 0o644))
	e := kernel.New(opts)
	must(t, e.Provide(kernel.Provider{Kind: handle.KindFS, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		fs, err := fsroot.New(fsroot.Grants{Root: root})
		if err != nil {
			return nil, err
		}
		return kernel.Static(fs, fs.Close), nil
	}}))
	e.Setup(context.Background())
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func attach(t testing.TB, e *kernel.Environment, atts ...kernel.Attachment) {
	t.Helper()
	if rec := e.Attach(context.Background(), atts...); !rec.OK() {
		t.Fatalf("attach: %+v", rec.Failures)
	}
}

func invoke(e *kernel.Environment, name, input string) protocol.Outcome {
	return e.Invoke(context.Background(), name, kernel.Call{Input: json.RawMessage(input)})
}

func wantCode(t *testing.T, out protocol.Outcome, code protocol.Code) {
	t.Helper()
	if out.IsOK() || out.Err.Code != code {
		t.Fatalf("outcome = %+v %s, want code %s", out.Err, out.Value, code)
	}
}

func wantValue(t *testing.T, out protocol.Outcome, value string) {
	t.Helper()
	if !out.IsOK() || string(out.Value) != value {
		t.Fatalf("outcome = %+v %s, want value %s", out.Err, out.Value, value)
	}
}

func TestArtifactReadsThroughFS(t *testing.T) {
	h := newHost(t, nil)
	e := newEnv(t, nil)
	attach(t, e, kernel.Attachment{Tool: load(t, h, "escape")})
	var progress []tool.Progress
	out := e.Invoke(context.Background(), "escape", kernel.Call{Input: json.RawMessage(`{"path":"notes.txt"}`),
		Progress: func(p tool.Progress) { progress = append(progress, p) }})
	wantValue(t, out, `"hello from the workspace"`)
	if len(progress) != 1 || progress[0].Message != "reading" {
		t.Errorf("progress = %+v", progress)
	}
	for _, p := range []string{"../secret.txt", "/etc/passwd", "a/../../secret.txt"} {
		t.Run(p, func(t *testing.T) {
			out := invoke(e, "escape", `{"path":"`+p+`"}`)
			wantCode(t, out, protocol.CodePathEscape)
			if strings.Contains(out.Err.Message, "outside") && strings.Contains(out.Err.Message, "secret") && strings.Contains(out.Err.Message, "hello") {
				t.Errorf("message leaks content: %s", out.Err.Message)
			}
		})
	}
	wantValue(t, invoke(e, "escape", `{"path":"notes.txt"}`), `"hello from the workspace"`)
	wantCode(t, invoke(e, "escape", `{"path":7}`), protocol.CodeInvalidInput)
}

// TestRunTimeFailures: each failure ends the call with its code, and the
// environment keeps serving other calls — and the same tool — afterwards.
func TestRunTimeFailures(t *testing.T) {
	h := newHost(t, &host.Options{MemoryLimitMiB: 64, PoolSize: 2})
	e := newEnv(t, &kernel.Options{CallTimeout: 30 * time.Second})
	attach(t, e, kernel.Attachment{Tool: load(t, h, "behave")}, kernel.Attachment{Tool: load(t, h, "echo")})
	tests := []struct {
		name, tool, input string
		deadline          time.Duration
		code              protocol.Code
	}{
		{"infinite loop stopped at its deadline", "behave", `{"do":"loop"}`, time.Second, protocol.CodeTimeout},
		{"memory bomb stopped at its limit", "behave", `{"do":"bomb"}`, 0, protocol.CodeInternal},
		{"trap", "behave", `{"do":"crash"}`, 0, protocol.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			wantCode(t, e.Invoke(ctx, tt.tool, kernel.Call{Input: json.RawMessage(tt.input)}), tt.code)
			wantValue(t, invoke(e, "echo", `{"text":"still here"}`), `{"text":"still here"}`)
			wantValue(t, invoke(e, "behave", `{"do":"answer"}`), `"fine"`)
		})
	}
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan protocol.Outcome)
		go func() { done <- e.Invoke(ctx, "behave", kernel.Call{Input: json.RawMessage(`{"do":"loop"}`)}) }()
		cancel()
		wantCode(t, <-done, protocol.CodeCancelled)
		wantValue(t, invoke(e, "echo", `{"text":"x"}`), `{"text":"x"}`)
	})
}

func TestAttachFailures(t *testing.T) {
	readManifest := func(t *testing.T, name string) tool.Manifest {
		b, err := os.ReadFile(filepath.Join(artifacts, name+".tool.json"))
		must(t, err)
		var m tool.Manifest
		must(t, json.Unmarshal(b, &m))
		return m
	}
	t.Run("unknown identity", func(t *testing.T) {
		h := newHost(t, nil)
		m := readManifest(t, "echo")
		m.Payload = "sha256:" + strings.Repeat("0", 64)
		assertFailure(t, newEnv(t, nil), kernel.Attachment{Tool: h.Artifact(m)}, protocol.CodeNotFound, "unknown payload identity")
	})
	t.Run("bytes do not match identity", func(t *testing.T) {
		h := newHost(t, nil)
		m := readManifest(t, "echo")
		if err := h.AddPayload(m.Payload, []byte("\x00asm tampered")); err == nil || !strings.Contains(err.Error(), "does not match its identity") {
			t.Fatalf("AddPayload = %v", err)
		}
		dir := t.TempDir()
		payload, _ := os.ReadFile(filepath.Join(artifacts, "echo.wasm"))
		payload[len(payload)-1] ^= 0xff
		mb, _ := json.Marshal(m)
		must(t, os.WriteFile(filepath.Join(dir, "echo.tool.json"), mb, 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "echo.wasm"), payload, 0o644))
		if _, err := h.LoadManifest(filepath.Join(dir, "echo.tool.json")); err == nil || !strings.Contains(err.Error(), "does not match its identity") {
			t.Fatalf("LoadManifest = %v", err)
		}
	})
	t.Run("does not compile", func(t *testing.T) {
		h := newHost(t, nil)
		garbage := []byte("\x00asm\x01\x00\x00\x00garbage")
		m := readManifest(t, "echo")
		m.Payload = host.Identity(garbage)
		must(t, h.AddPayload(m.Payload, garbage))
		assertFailure(t, newEnv(t, nil), kernel.Attachment{Tool: h.Artifact(m)}, protocol.CodeInvalidRequest, "does not compile")
	})
	t.Run("panics in init", func(t *testing.T) {
		h := newHost(t, nil)
		assertFailure(t, newEnv(t, nil), kernel.Attachment{Tool: load(t, h, "initpanic")}, protocol.CodeInternal, "init panicked: init exploded")
	})
	t.Run("memory limit below the module's minimum", func(t *testing.T) {
		h := newHost(t, &host.Options{MemoryLimitMiB: 1})
		assertFailure(t, newEnv(t, nil), kernel.Attachment{Tool: load(t, h, "echo")}, protocol.CodeInvalidRequest, "over limit")
	})
	t.Run("imports a handle it did not declare", func(t *testing.T) {
		h := newHost(t, nil)
		m := readManifest(t, "runner") // imports brain_exec
		m.Requires = []handle.Kind{handle.KindFS}
		a := h.Artifact(m)
		_, _ = h.LoadManifest(filepath.Join(artifacts, "runner.tool.json")) // registers the payload
		assertFailure(t, newEnv(t, nil), kernel.Attachment{Tool: a, Bindings: map[string]json.RawMessage{"program": json.RawMessage(`"true"`)}},
			protocol.CodeForbidden, "imports host function brain_exec.run")
	})
	t.Run("needs a handle the environment does not provide", func(t *testing.T) {
		h := newHost(t, nil)
		assertFailure(t, newEnv(t, nil), kernel.Attachment{Tool: load(t, h, "runner"), Bindings: map[string]json.RawMessage{"program": json.RawMessage(`"true"`)}},
			protocol.CodeUnavailable, "requires [exec net]")
	})
	t.Run("lacks a binding value", func(t *testing.T) {
		h := newHost(t, nil)
		m := readManifest(t, "runner")
		m.Requires = nil // so that only the binding is missing
		_, _ = h.LoadManifest(filepath.Join(artifacts, "runner.tool.json"))
		assertFailure(t, newEnv(t, nil), kernel.Attachment{Tool: h.Artifact(m)}, protocol.CodeInvalidInput, `binding "program" has no value`)
	})
}

func assertFailure(t *testing.T, e *kernel.Environment, a kernel.Attachment, code protocol.Code, reason string) {
	t.Helper()
	rec := e.Attach(context.Background(), a)
	if len(rec.Failures) != 1 || rec.Failures[0].Code != code || !strings.Contains(rec.Failures[0].Reason, reason) {
		t.Fatalf("receipt = %+v, want one failure %s containing %q", rec, code, reason)
	}
	if len(rec.Attached) != 0 {
		t.Fatalf("attached %v despite the failure", rec.Attached)
	}
}

func TestConcurrentCallsArePooled(t *testing.T) {
	h := newHost(t, &host.Options{PoolSize: 2})
	e := newEnv(t, nil)
	attach(t, e, kernel.Attachment{Tool: load(t, h, "echo")})
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			in := fmt.Sprintf(`{"text":"call %d"}`, i)
			out := invoke(e, "echo", in)
			if !out.IsOK() || string(out.Value) != in {
				errs <- fmt.Errorf("call %d: %+v %s", i, out.Err, out.Value)
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
