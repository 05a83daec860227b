// Package build turns tool packages into content-addressed artifacts: per
// tool a WebAssembly payload (GOOS=wasip1 GOARCH=wasm, a reactor) and its
// tool/v1 manifest, <name>.tool.json, whose payload field is the payload's
// sha-256; and per tool of a TypeScript or JavaScript project a bundled
// ES module, <name>.mjs, and its manifest (see [BuildScripts]). [Build] is
// what `brain build` runs.
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

// Build builds every tool matched by patterns, as `brain build` does: a
// pattern naming a directory with a package.json (relative to opts.Dir)
// is a script project (see [BuildScripts]); the others are go list
// patterns, whose packages without an exported Tool variable are skipped
// (a pattern matching none is an error). No patterns means ".". The
// artifacts are those of the script projects, in the patterns' order,
// then those of the Go packages.
//
// Every tool is built and checked before anything is written, so a build
// that fails writes nothing: a tool's name must be a capability name that
// can also name files in opts.Out (no '/' or '\', no leading '.' or '-',
// at most 245 bytes), and no two tools, of any kind, may share a name.
func Build(ctx context.Context, patterns []string, opts Options) ([]Artifact, error) {
	if opts.Out == "" {
		return nil, fmt.Errorf("build: no output directory")
	}
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	var (
		n          names
		st         []staged
		goPatterns []string
	)
	seen := map[string]bool{} // a project named twice (., ./, its path) is built once
	for _, p := range patterns {
		dir := p
		if opts.Dir != "" && !filepath.IsAbs(p) {
			dir = filepath.Join(opts.Dir, p)
		}
		if !IsScriptProject(dir) {
			if err := pathError(p, dir); err != nil {
				return nil, err
			}
			goPatterns = append(goPatterns, p)
			continue
		}
		if abs, err := filepath.Abs(dir); err == nil {
			if seen[abs] {
				continue
			}
			seen[abs] = true
		}
		s, err := stageScripts(ctx, dir, &n)
		if err != nil {
			return nil, err
		}
		st = append(st, s...)
	}
	if len(goPatterns) > 0 {
		tools, modRoot, err := listTools(ctx, opts.Dir, goPatterns)
		if err != nil {
			return nil, err
		}
		stage, err := os.MkdirTemp("", "brain-build-")
		if err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
		defer os.RemoveAll(stage)
		s, err := buildAll(ctx, opts.Dir, modRoot, stage, tools, &n)
		if err != nil {
			return nil, err
		}
		st = append(st, s...)
	}
	arts, err := commit(opts.Out, st)
	warnUnused(opts.Logger, arts)
	return arts, err
}

// warnUnused logs the declared handles each artifact's code never uses,
// and an input schema that is not an object (which no MCP client can
// call); a nil logger discards.
func warnUnused(logger *slog.Logger, arts []Artifact) {
	if logger == nil {
		return
	}
	for _, a := range arts {
		msg := "declared handle is never used by the tool's code; consider removing it from the handles struct"
		if a.Manifest.Runtime == tool.RuntimeJS {
			msg = "declared handle is never used by the tool's own code; consider removing it from requires"
		}
		for _, k := range a.Unused {
			logger.Warn(msg, slog.String("tool", a.Manifest.Name), slog.String("handle", string(k)))
		}
		if t, ok := nonObjectInput(a.Manifest.InputSchema); ok {
			logger.Warn("the input schema is not an object: MCP requires a tool's input to be one, so MCP clients cannot call this tool; make the input an object (z.object({...}))",
				slog.String("tool", a.Manifest.Name), slog.String("type", t))
		}
	}
}

// nonObjectInput reports whether an input schema says its top-level type
// is something other than an object, and which.
func nonObjectInput(schema json.RawMessage) (string, bool) {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(schema, &s) != nil || s.Type == nil || s.Type == "object" {
		return "", false
	}
	b, _ := json.Marshal(s.Type)
	return string(b), true
}

// goTool is a package that exports Tool, and the file that declares it.
type goTool struct {
	pkg, file string
}

// buildAll builds tools a few at a time: each build is two go commands
// (the manifest's run, the payload's link) whose loading and linking run
// on one core, so that n at once on n cores take about 1/n of the time.
// Payloads are left in stage; names are claimed in n as soon as each
// manifest is read. The first failure cancels the builds not yet done and
// is the one reported (the later ones may only be the cancellation);
// the staged tools are in tools' order.
func buildAll(ctx context.Context, dir, modRoot, stage string, tools []goTool, n *names) ([]staged, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]staged, len(tools))
	var (
		mu    sync.Mutex
		first error
	)
	slots := make(chan struct{}, max(2, runtime.NumCPU()))
	var wg sync.WaitGroup
	for i, t := range tools {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if ctx.Err() != nil {
				return
			}
			payloadPath := filepath.Join(stage, fmt.Sprintf("%d.wasm", i))
			s, err := buildOne(ctx, dir, modRoot, t, payloadPath, n)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("build %s: %w", t.pkg, err)
				}
				mu.Unlock()
				cancel()
				return
			}
			out[i] = s
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err() // the caller's context ended
	}
	if first != nil {
		return nil, first
	}
	return out, nil
}

type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Module     *struct{ Dir string }
}

// listTools returns the matched packages that export Tool, and the module
// root.
func listTools(ctx context.Context, dir string, patterns []string) ([]goTool, string, error) {
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
	var tools []goTool
	modRoot := ""
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, "", fmt.Errorf("go list: %w", err)
		}
		if p.Module != nil {
			modRoot = p.Module.Dir
		}
		if f, ok := exportsTool(p.Dir, p.GoFiles); ok {
			tools = append(tools, goTool{pkg: p.ImportPath, file: displayPath(f)})
		}
	}
	if len(tools) == 0 {
		return nil, "", fmt.Errorf("no tool package matches %v (a tool package exports a variable named Tool made with tool.New)", patterns)
	}
	return tools, modRoot, nil
}

// exportsTool reports whether a package declares a top-level var Tool,
// and the path of the file that does.
func exportsTool(dir string, files []string) (string, bool) {
	fset := token.NewFileSet()
	for _, f := range files {
		path := filepath.Join(dir, f)
		af, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
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
						return path, true
					}
				}
			}
		}
	}
	return "", false
}

// displayPath is path relative to the current directory when it is under
// it, for messages; otherwise path.
func displayPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
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

// buildOne builds the tool t: its manifest natively, then its payload for
// wasip1 into payloadPath, both from generated main packages placed in the
// module through a go build overlay (nothing is written to the module).
// The tool's name is claimed in n before the payload is compiled.
func buildOne(ctx context.Context, dir, modRoot string, t goTool, payloadPath string, n *names) (staged, error) {
	tmp, err := os.MkdirTemp("", "brain-build-")
	if err != nil {
		return staged{}, err
	}
	defer os.RemoveAll(tmp)

	var m tool.Manifest
	mb, err := goWithMain(ctx, dir, modRoot, tmp, "manifest", fmt.Sprintf(manifestMain, t.pkg), nil, "run")
	if err != nil {
		return staged{}, fmt.Errorf("read manifest: %w", err)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return staged{}, fmt.Errorf("read manifest: %w", err)
	}
	if err := n.claim(m.Name, t.file); err != nil {
		return staged{}, fmt.Errorf("%s: %w", t.file, err)
	}
	var hs []string
	for _, k := range m.Requires {
		hs = append(hs, guestHandle[k])
	}
	env := []string{"GOOS=wasip1", "GOARCH=wasm"}
	if _, err := goWithMain(ctx, dir, modRoot, tmp, "guest", fmt.Sprintf(guestMain, t.pkg, strings.Join(hs, ", ")), env,
		"build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-ldflags=-buildid=", "-o", payloadPath); err != nil {
		return staged{}, fmt.Errorf("compile payload: %w", err)
	}
	payload, err := os.ReadFile(payloadPath)
	if err != nil {
		return staged{}, err
	}
	sum := sha256.Sum256(payload)
	m.Payload = "sha256:" + hex.EncodeToString(sum[:])
	m.Runtime = abi.Runtime

	imports, err := Imports(ctx, payload)
	if err != nil {
		return staged{}, fmt.Errorf("read payload imports: %w", err)
	}
	a := Artifact{Package: t.pkg, Manifest: m, Imports: imports}
	for _, k := range m.Requires {
		prefix := abi.HandleModule(k) + "."
		if !slices.ContainsFunc(imports, func(s string) bool { return strings.HasPrefix(s, prefix) }) {
			a.Unused = append(a.Unused, k)
		}
	}
	return staged{art: a, ext: ".wasm", payloadFile: payloadPath}, nil
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
