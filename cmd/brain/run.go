package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide"
	"github.com/brainrt/brain/provide/fsroot"
)

// bindingFlags collects repeated --binding name=JSON flags.
type bindingFlags map[string]json.RawMessage

func (b bindingFlags) String() string { return fmt.Sprint(len(b), " bindings") }

func (b bindingFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=JSON, got %q", v)
	}
	if !json.Valid([]byte(value)) {
		// A bare word is taken as a string, so --binding token=abc works.
		quoted, _ := json.Marshal(value)
		value = string(quoted)
	}
	b[name] = json.RawMessage(value)
	return nil
}

// runRun is `brain run ARTIFACT --input JSON`: one call in a local
// environment; prints the Outcome. Exit 0 on a value, 1 on an error
// outcome, 2 on bad usage.
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "run ARTIFACT --input JSON [--grants FILE | --workspace DIR] [--binding name=JSON]",
		`Runs one call of ARTIFACT (<name>.tool.json) in a local environment and prints
its Outcome as JSON: {"ok":true,"value":...} or {"ok":false,"error":{code,message}}.
Exit status: 0 for a value, 1 for an error outcome or an artifact, grants file or
workspace that does not load, 2 for bad usage.`,
		`brain run artifacts/fs.read.tool.json --input '{"path":"notes.txt"}' --workspace examples/workspace`)
	input := fs.String("input", "{}", "the call's input, as JSON")
	grantsFile := fs.String("grants", "", "grants file (YAML, docs/grants.md); default: only fs, over --workspace")
	workspace := fs.String("workspace", ".", "the fs root when no --grants file is given")
	timeout := fs.Duration("timeout", 60*time.Second, "the deadline of the attach (the tool's init), and of the call")
	cacheDir := fs.String("cache", defaultCacheDir(), "compilation cache directory")
	bindings := bindingFlags{}
	fs.Var(bindings, "binding", "a binding value, name=JSON (repeatable; a bare word is a string)")
	flags, rest := splitFlags(args)
	if code, ok := parseFlags(fs, flags, stdout, stderr); !ok {
		return code
	}
	rest = append(rest, fs.Args()...)
	if len(rest) != 1 {
		return usageError(stderr, "run", "want exactly one ARTIFACT, got %d arguments %q", len(rest), rest)
	}
	if !json.Valid([]byte(*input)) {
		return usageError(stderr, "run", "--input is not JSON: %s", *input)
	}
	if *timeout <= 0 {
		return usageError(stderr, "run", "--timeout must be positive, got %s", *timeout)
	}
	var g provide.Grants
	var err error
	if *grantsFile != "" {
		if g, err = provide.Load(*grantsFile); err != nil {
			fmt.Fprintln(stderr, "brain run:", err)
			return exitFail
		}
	} else {
		ws, _ := filepath.Abs(*workspace)
		g = provide.Grants{Workspace: ws, FS: &fsroot.Grants{}}
	}

	h, err := host.New(ctx, &host.Options{CacheDir: *cacheDir})
	if err != nil {
		fmt.Fprintln(stderr, "brain run:", err)
		return 1
	}
	defer h.Close(context.WithoutCancel(ctx))
	art, err := loadArtifact(rest[0], h, &scriptHost{cacheDir: *cacheDir})
	if err != nil { // a missing, malformed or tampered artifact: the job failed
		fmt.Fprintln(stderr, "brain run:", err)
		return exitFail
	}
	env, setup, err := provide.Environment(ctx, g, &kernel.Options{CallTimeout: *timeout})
	if err != nil {
		fmt.Fprintln(stderr, "brain run:", err)
		return exitFail
	}
	defer env.Close()
	for _, f := range setup.Failures {
		fmt.Fprintf(stderr, "brain run: %s handle unavailable: %s\n", f.Name, f.Reason)
	}
	out := protocol.Outcome{}
	// --timeout bounds the attach (instantiation and the tool's init) as
	// well as the call, each.
	attachCtx, cancel := context.WithTimeout(ctx, *timeout)
	rec := env.Attach(attachCtx, kernel.Attachment{Tool: art, Bindings: bindings})
	cancel()
	if !rec.OK() {
		f := rec.Failures[0]
		out = protocol.Fail(f.Code, "attach %s: %s", f.Name, f.Reason)
		if h := attachHint(f, true); h != "" {
			fmt.Fprintln(stderr, "brain run:", h) // stdout is the outcome alone
		}
	} else {
		out = env.Invoke(ctx, art.Manifest().Name, kernel.Call{Input: json.RawMessage(*input)})
	}
	// Without HTML escaping: "<" and "&" as they are, not \u003c and
	// \u0026 (stdout is read by people and scripts, not embedded in HTML).
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(out)
	if !out.IsOK() {
		return 1
	}
	return 0
}

// defaultCacheDir is the host's compilation cache: private to the user.
func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "brain", "wazero")
	}
	return filepath.Join(os.TempDir(), "brain-wazero-cache")
}
