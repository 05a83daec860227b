package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/evanw/esbuild/pkg/api"
	"modernc.org/quickjs"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/internal/jsvm"
	"github.com/brainrt/brain/tool"
)

// A script project is a TypeScript or JavaScript project: a directory with
// a package.json. Its tools are the files named *.tool.ts, *.tool.mts,
// *.tool.js or *.tool.mjs anywhere under it (node_modules, dist and
// directories starting with a dot aside), each of which default-exports
// one tool made with @brainrt/sdk's tool(). Building needs no Node: the
// bundle is made by esbuild's Go API from the project's node_modules (npm
// ci first), and the tool's schemas are read by running the bundle in
// brain's JavaScript engine.

// scriptExts are the file names of tools in a script project.
var scriptExts = []string{".tool.ts", ".tool.mts", ".tool.js", ".tool.mjs"}

// IsScriptProject reports whether dir is a TypeScript or JavaScript
// project: a directory holding a package.json.
func IsScriptProject(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "package.json"))
	return err == nil && fi.Mode().IsRegular()
}

// ScriptTools returns the tool files of the project at dir, sorted,
// relative to dir.
func ScriptTools(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (name == "node_modules" || name == "dist" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		for _, ext := range scriptExts {
			if strings.HasSuffix(name, ext) && d.Type().IsRegular() {
				rel, _ := filepath.Rel(dir, p)
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// BuildScripts builds every tool of the script project at dir into a
// JavaScript artifact: <name>.mjs, a single self-contained ES module
// bundled by esbuild, and <name>.tool.json, its tool/v1 manifest (runtime
// js/1), whose schemas, requires and bindings come from the tool's own
// definition, evaluated at build time. Two builds of the same sources
// give identical bytes. A declared handle that the tool's own code never
// names is warned about (see Artifact.Unused), never an error.
//
// Every tool is built and checked before anything is written, so a build
// that fails writes nothing: a tool's name must be a capability name that
// can also name files in opts.Out (no '/' or '\', no leading '.' or '-',
// at most 245 bytes), no two tools may share a name, and a bundle may
// have at most [jshost.MaxPayloadBytes], which every host refuses beyond.
func BuildScripts(ctx context.Context, dir string, opts Options) ([]Artifact, error) {
	if opts.Out == "" {
		return nil, fmt.Errorf("build: no output directory")
	}
	st, err := stageScripts(ctx, dir, &names{})
	if err != nil {
		return nil, err
	}
	arts, err := commit(opts.Out, st)
	warnUnused(opts.Logger, arts)
	return arts, err
}

// stageScripts builds the tools of the script project at dir without
// writing them, and claims their names in n.
func stageScripts(ctx context.Context, dir string, n *names) ([]staged, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if !IsScriptProject(abs) {
		return nil, fmt.Errorf("build: %s has no package.json: a TypeScript or JavaScript project is a directory with one", dir)
	}
	files, err := ScriptTools(abs)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("build: no tool file under %s (a tool is a file named *.tool.ts, *.tool.mts, *.tool.js or *.tool.mjs whose default export is tool() from @brainrt/sdk)", dir)
	}
	var out []staged
	for _, f := range files {
		source := filepath.Join(dir, filepath.FromSlash(f)) // as the caller names the project
		s, err := buildScript(ctx, abs, f)
		if err == nil {
			err = n.claim(s.art.Manifest.Name, source)
		}
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", source, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// bundle bundles the entry file of the project at dir as one ES module;
// external leaves every package import out (for the unused-handle check).
func bundle(dir, entry string, external bool) ([]byte, error) {
	o := api.BuildOptions{
		EntryPoints:   []string{entry},
		AbsWorkingDir: dir,
		Bundle:        true,
		Write:         false,
		Outfile:       "bundle.mjs",
		Format:        api.FormatESModule,
		Platform:      api.PlatformNeutral,
		Target:        api.ES2023,
		MainFields:    []string{"module", "main"},
		Conditions:    []string{"import", "module", "default"},
		Charset:       api.CharsetUTF8,
		LegalComments: api.LegalCommentsNone,
		LogLevel:      api.LogLevelSilent,
		TreeShaking:   api.TreeShakingTrue,
	}
	if external {
		o.Packages = api.PackagesExternal
	} else {
		o.MinifyWhitespace, o.MinifySyntax = true, true
	}
	r := api.Build(o)
	if len(r.Errors) > 0 {
		var msgs []string
		for _, m := range r.Errors {
			s := m.Text
			if m.Location != nil {
				s = fmt.Sprintf("%s:%d:%d: %s", m.Location.File, m.Location.Line, m.Location.Column, m.Text)
			}
			msgs = append(msgs, s)
		}
		return nil, fmt.Errorf("esbuild: %s", strings.Join(msgs, "; "))
	}
	if len(r.OutputFiles) != 1 {
		return nil, fmt.Errorf("esbuild wrote %d files, want one", len(r.OutputFiles))
	}
	return r.OutputFiles[0].Contents, nil
}

// describeBundle bundles the tool file for describe: the payload, plus
// zod's JSON Schema conversion when the project has zod (for schemas that
// cannot convert themselves, such as zod/mini's, which keep a payload
// small). It runs at build time only; the payload is bundled on its own.
func describeBundle(dir, file string) ([]byte, error) {
	src := "import " + strconvQuote("./"+file) + ";\n" // its tool() registers itself
	if fi, err := os.Stat(filepath.Join(dir, "node_modules", "zod", "package.json")); err == nil && fi.Mode().IsRegular() {
		src = "import * as brainZod from \"zod\";\nglobalThis[Symbol.for(\"brain.zod\")] = brainZod;\n" + src
	}
	r := api.Build(api.BuildOptions{
		Stdin:         &api.StdinOptions{Contents: src, ResolveDir: dir, Sourcefile: "brain-describe.mjs", Loader: api.LoaderJS},
		AbsWorkingDir: dir, Bundle: true, Write: false, Outfile: "describe.mjs", Format: api.FormatESModule,
		Platform: api.PlatformNeutral, Target: api.ES2023, MainFields: []string{"module", "main"},
		Conditions: []string{"import", "module", "default"}, LogLevel: api.LogLevelSilent,
	})
	if len(r.Errors) > 0 || len(r.OutputFiles) != 1 {
		var msgs []string
		for _, m := range r.Errors {
			msgs = append(msgs, m.Text)
		}
		return nil, fmt.Errorf("esbuild (describe): %s", strings.Join(msgs, "; "))
	}
	return r.OutputFiles[0].Contents, nil
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// buildScript bundles and describes the tool file of the project at dir.
func buildScript(ctx context.Context, dir, file string) (staged, error) {
	payload, err := bundle(dir, "./"+file, false)
	if err != nil {
		return staged{}, err
	}
	// Checked before the bundle is evaluated: a bundle too large to load
	// would also take the engine a long time and much memory to describe.
	if len(payload) > jshost.MaxPayloadBytes {
		return staged{}, fmt.Errorf("the bundle has %d bytes, more than the %d (%d MiB) a JavaScript host loads: keep large data out of the bundle (read it through a handle at run time)",
			len(payload), jshost.MaxPayloadBytes, jshost.MaxPayloadBytes>>20)
	}
	own, err := bundle(dir, "./"+file, true)
	if err != nil {
		return staged{}, err
	}
	described, err := describeBundle(dir, file)
	if err != nil {
		return staged{}, err
	}
	m, err := describe(ctx, described)
	if err != nil {
		return staged{}, err
	}
	sum := sha256.Sum256(payload)
	m.Payload = "sha256:" + hex.EncodeToString(sum[:])
	a := Artifact{Package: file, Manifest: m}
	idents := identifiers(own)
	for _, k := range m.Requires {
		if !idents[string(k)] {
			a.Unused = append(a.Unused, k)
		}
	}
	return staged{art: a, ext: ".mjs", payload: payload}, nil
}

// describeScript runs after the bundle's module: it returns what tool()
// registered, described, as JSON.
const describePre = `globalThis[Symbol.for("brain.register")] = (t) => {
  if (globalThis.__brainBuilt !== undefined) throw new Error("the file's module defines more than one tool");
  globalThis.__brainBuilt = t;
};`

const describePost = `(() => {
  const t = globalThis.__brainBuilt;
  if (t === undefined) throw new Error("the file's module defined no tool: its default export is tool() from @brainrt/sdk");
  if (typeof t.describe !== "function") throw new Error("the tool has no describe(): make it with tool() from @brainrt/sdk");
  const z = globalThis[Symbol.for("brain.zod")];
  const convert = z && typeof z.toJSONSchema === "function" ? (s, o) => z.toJSONSchema(s, o) : undefined;
  return JSON.stringify(t.describe(convert));
})()`

// describe evaluates the bundle in brain's JavaScript engine, as the host
// will, and reads the manifest fields its tool defines (zod's own JSON
// Schema conversion runs there). Binding values cannot appear: a tool
// declares only the schemas of its bindings.
func describe(ctx context.Context, payload []byte) (tool.Manifest, error) {
	vm, err := jsvm.New(jsvm.Limits{MemoryBytes: 256 << 20})
	if err != nil {
		return tool.Manifest{}, err
	}
	defer vm.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var raw string
	err = vm.Run(ctx, func(q *quickjs.VM) error {
		if _, err := q.Eval(describePre, quickjs.EvalGlobal); err != nil {
			return err
		}
		code, err := q.Compile(string(payload), quickjs.EvalModule)
		if err != nil {
			return err
		}
		if err := vm.EvalModule(code); err != nil {
			return err
		}
		v, err := q.Eval(describePost, quickjs.EvalGlobal)
		if err != nil {
			return err
		}
		s, ok := v.(string)
		if !ok {
			return errors.New("describe() did not give JSON")
		}
		raw = s
		return nil
	})
	if err != nil {
		return tool.Manifest{}, fmt.Errorf("evaluate the bundle: %w", err)
	}
	var d struct {
		Name           string                     `json:"name"`
		Description    string                     `json:"description"`
		InputSchema    json.RawMessage            `json:"input_schema"`
		OutputSchema   json.RawMessage            `json:"output_schema"`
		Requires       []string                   `json:"requires"`
		BindingNames   []string                   `json:"binding_names"`
		BindingSchemas map[string]json.RawMessage `json:"binding_schemas"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return tool.Manifest{}, fmt.Errorf("describe(): %w", err)
	}
	m := tool.Manifest{Format: tool.Format, Name: d.Name, Description: d.Description, InputSchema: d.InputSchema,
		OutputSchema: d.OutputSchema, Requires: []handle.Kind{}, BindingNames: d.BindingNames, BindingSchemas: d.BindingSchemas,
		Hosting: tool.HostingProvisioned, Runtime: tool.RuntimeJS}
	if m.BindingNames == nil {
		m.BindingNames = []string{}
	}
	for _, r := range d.Requires {
		k, err := handle.ParseKind(r)
		if err != nil {
			return tool.Manifest{}, fmt.Errorf("tool %q: requires: %w", d.Name, err)
		}
		m.Requires = append(m.Requires, k)
	}
	slices.Sort(m.Requires)
	if err := nameError(m.Name); err != nil { // before Validate, whose refusal does not state build's rule
		return tool.Manifest{}, err
	}
	if err := m.Validate(); err != nil {
		return tool.Manifest{}, err
	}
	return m, nil
}

// identifiers returns the identifier tokens of JavaScript source, outside
// strings, template text, regular expressions and comments: a declared
// handle the tool's code uses appears as one (ctx.handles.fs, { fs }),
// while its name in requires is a string.
func identifiers(src []byte) map[string]bool {
	out := map[string]bool{}
	s := string(src)
	isID := func(c byte) bool {
		return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	prevSignificant := byte(0)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
			continue
		case c == '"' || c == '\'' || c == '`':
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' {
					i++
				} else if c == '`' && s[i] == '$' && i+1 < len(s) && s[i+1] == '{' {
					// the expression inside ${...}: its identifiers count
					depth, j := 1, i+2
					for j < len(s) && depth > 0 {
						switch s[j] {
						case '{':
							depth++
						case '}':
							depth--
						}
						j++
					}
					for k, v := range identifiers([]byte(s[i+2 : j-1])) {
						out[k] = v
					}
					i = j
					continue
				}
				i++
			}
			i++
			prevSignificant = 'a'
			continue
		case c == '/' && strings.IndexByte("(,=:[!&|?{};", prevSignificant) >= 0:
			// a regular expression literal
			i++
			inClass := false
			for i < len(s) && (s[i] != '/' || inClass) && s[i] != '\n' {
				switch s[i] {
				case '\\':
					i++
				case '[':
					inClass = true
				case ']':
					inClass = false
				}
				i++
			}
			i++
			prevSignificant = 'a'
			continue
		case isID(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(s) && isID(s[j]) {
				j++
			}
			out[s[i:j]] = true
			i = j
			prevSignificant = 'a'
			continue
		}
		if c != ' ' && c != '\n' && c != '\t' && c != '\r' {
			prevSignificant = c
		}
		i++
	}
	return out
}
