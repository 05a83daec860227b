// Package build turns tool packages into content-addressed artifacts: per
// tool a WebAssembly payload (GOOS=wasip1 GOARCH=wasm, a reactor) and its
// tool/v1 manifest, <name>.tool.json, whose payload field is the payload's
// sha-256. It is what `brain build` runs.
//
// A tool package exports one variable, Tool, made with tool.New. Each
// payload holds exactly one tool and the guest handles it declares, so its
// import section names the handles its code can reach: build warns — never
// fails — when a declared handle is not imported, since the Go linker drops
// host functions that nothing calls.
package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/tool"
)

// Options configure a build.
type Options struct {
	// Dir is where the go command runs: inside the module holding the tool
	// packages. Default: the current directory.
	Dir string
	// Out is the directory artifacts are written to; required.
	Out string
	// Logger receives warnings (unused handles) and progress; nil discards.
	Logger *slog.Logger
}

// Artifact is one built tool.
type Artifact struct {
	Package      string        // import path of the tool package
	Manifest     tool.Manifest // with Payload set
	ManifestPath string
	PayloadPath  string
	Imports      []string      // "module.name" of every host function the payload imports
	Unused       []handle.Kind // declared handles the payload never imports
}

// Build builds every tool package matched by patterns (go list patterns;
// packages without an exported Tool variable are skipped, but a pattern
// matching none is an error).
func Build(ctx context.Context, patterns []string, opts Options) ([]Artifact, error) {
	if opts.Out == "" {
		return nil, fmt.Errorf("build: no output directory")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	pkgs, modRoot, err := listTools(ctx, opts.Dir, patterns)
	if err != nil {
		return nil, err
	}
	arts, err := buildAll(ctx, opts, modRoot, pkgs)
	if err != nil {
		return nil, err
	}
	var out []Artifact
	for _, a := range arts {
		for _, k := range a.Unused {
			opts.Logger.Warn("declared handle is never used by the tool's code; consider removing it from the handles struct",
				slog.String("tool", a.Manifest.Name), slog.String("handle", string(k)))
		}
		out = append(out, a)
	}
	return out, nil
}

// buildAll builds pkgs a few at a time: each build is two go commands
// (the manifest's run, the payload's link) whose loading and linking run
// on one core, so that n at once on n cores take about 1/n of the time.
// The first failure cancels the builds not yet done and is the one
// reported (the later ones may only be the cancellation); artifacts are
// in pkgs' order.
func buildAll(ctx context.Context, opts Options, modRoot string, pkgs []string) ([]Artifact, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	arts := make([]Artifact, len(pkgs))
	var (
		mu     sync.Mutex
		first  error
		byName = map[string]string{} // tool name → the package that has it
	)
	// Two packages with one tool name would write the same files.
	claim := func(pkg string) func(string) error {
		return func(name string) error {
			mu.Lock()
			defer mu.Unlock()
			if other, ok := byName[name]; ok {
				return fmt.Errorf("its tool is named %q, as the tool of %s is: tool names must be unique", name, other)
			}
			byName[name] = pkg
			return nil
		}
	}
	slots := make(chan struct{}, max(2, runtime.NumCPU()))
	var wg sync.WaitGroup
	for i, p := range pkgs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if ctx.Err() != nil {
				return
			}
			a, err := buildOne(ctx, opts, modRoot, p, claim(p))
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("build %s: %w", p, err)
				}
				mu.Unlock()
				cancel()
				return
			}
			arts[i] = a
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err() // the caller's context ended
	}
	return arts, first
}

type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Module     *struct{ Dir string }
}

// listTools returns the import paths of the matched packages that export
// Tool, and the module root.
func listTools(ctx context.Context, dir string, patterns []string) ([]string, string, error) {
	args := append([]string{"list", "-json=ImportPath,Dir,GoFiles,Module"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("go list: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var tools []string
	modRoot := ""
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, "", fmt.Errorf("go list: %w", err)
		}
		if p.Module != nil {
			modRoot = p.Module.Dir
		}
		if exportsTool(p.Dir, p.GoFiles) {
			tools = append(tools, p.ImportPath)
		}
	}
	if len(tools) == 0 {
		return nil, "", fmt.Errorf("no tool package matches %v (a tool package exports a variable named Tool made with tool.New)", patterns)
	}
	return tools, modRoot, nil
}

// exportsTool reports whether a package declares a top-level var Tool.
func exportsTool(dir string, files []string) bool {
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, filepath.Join(dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.Name == "Tool" {
						return true
					}
				}
			}
		}
	}
	return false
}

const genDir = "brainbuildgen"

const manifestMain = `package main

import (
	"encoding/json"
	"os"

	t %q
)

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(t.Tool.Manifest()); err != nil {
		os.Exit(1)
	}
}
`

const guestMain = `//go:build wasip1

package main

import (
	"github.com/brainrt/brain/guest"
	"github.com/brainrt/brain/tool"

	t %q
)

func init() { guest.Serve(t.Tool, tool.Handles{%s}) }

func main() {}
`

var guestHandle = map[handle.Kind]string{
	handle.KindExec: "Exec: guest.Exec{}",
	handle.KindFS:   "FS: guest.FS{}",
	handle.KindNet:  "Net: guest.Net{}",
	handle.KindJS:   "JS: guest.JS{}",
	handle.KindPage: "Page: guest.Page{}",
}

// buildOne builds the tool of package pkg: its manifest natively, then its
// payload for wasip1, both from generated main packages placed in the
// module through a go build overlay (nothing is written to the module).
func buildOne(ctx context.Context, opts Options, modRoot, pkg string, claim func(name string) error) (Artifact, error) {
	tmp, err := os.MkdirTemp("", "brain-build-")
	if err != nil {
		return Artifact{}, err
	}
	defer os.RemoveAll(tmp)

	var m tool.Manifest
	mb, err := goWithMain(ctx, opts.Dir, modRoot, tmp, "manifest", fmt.Sprintf(manifestMain, pkg), nil, "run")
	if err != nil {
		return Artifact{}, fmt.Errorf("read manifest: %w", err)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return Artifact{}, fmt.Errorf("read manifest: %w", err)
	}
	var hs []string
	for _, k := range m.Requires {
		hs = append(hs, guestHandle[k])
	}
	payloadTmp := filepath.Join(tmp, "payload.wasm")
	env := []string{"GOOS=wasip1", "GOARCH=wasm"}
	if _, err := goWithMain(ctx, opts.Dir, modRoot, tmp, "guest", fmt.Sprintf(guestMain, pkg, strings.Join(hs, ", ")), env,
		"build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-ldflags=-buildid=", "-o", payloadTmp); err != nil {
		return Artifact{}, fmt.Errorf("compile payload: %w", err)
	}
	payload, err := os.ReadFile(payloadTmp)
	if err != nil {
		return Artifact{}, err
	}
	sum := sha256.Sum256(payload)
	m.Payload = "sha256:" + hex.EncodeToString(sum[:])
	m.Runtime = abi.Runtime

	imports, err := Imports(ctx, payload)
	if err != nil {
		return Artifact{}, fmt.Errorf("read payload imports: %w", err)
	}
	a := Artifact{Package: pkg, Manifest: m, Imports: imports}
	for _, k := range m.Requires {
		prefix := abi.HandleModule(k) + "."
		if !slices.ContainsFunc(imports, func(s string) bool { return strings.HasPrefix(s, prefix) }) {
			a.Unused = append(a.Unused, k)
		}
	}
	if err := claim(m.Name); err != nil {
		return Artifact{}, err
	}
	a.PayloadPath = filepath.Join(opts.Out, m.Name+".wasm")
	a.ManifestPath = filepath.Join(opts.Out, m.Name+".tool.json")
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Artifact{}, err
	}
	if err := os.WriteFile(a.PayloadPath, payload, 0o644); err != nil {
		return Artifact{}, err
	}
	if err := os.WriteFile(a.ManifestPath, append(mj, '\n'), 0o644); err != nil {
		return Artifact{}, err
	}
	return a, nil
}

// goWithMain runs `go <verb> <args> ./brainbuildgen/<name>` with a generated
// main.go overlaid into the module, and returns its standard output.
func goWithMain(ctx context.Context, dir, modRoot, tmp, name, src string, env []string, verb string, args ...string) ([]byte, error) {
	mainPath := filepath.Join(tmp, name+".go")
	if err := os.WriteFile(mainPath, []byte(src), 0o644); err != nil {
		return nil, err
	}
	virtual := filepath.Join(modRoot, genDir, name, "main.go")
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {virtual: mainPath}})
	overlayPath := filepath.Join(tmp, name+"-overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return nil, err
	}
	full := append([]string{verb, "-overlay", overlayPath}, args...)
	full = append(full, "./"+genDir+"/"+name)
	cmd := exec.CommandContext(ctx, "go", full...)
	cmd.Dir = modRoot
	if dir != "" {
		cmd.Dir = modRoot // the overlay path is relative to the module root
	}
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %v: %s", verb, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
