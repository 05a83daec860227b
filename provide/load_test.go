package provide_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/provide"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/fetch"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/provide/grant"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/provide/script"
)

// exampleFile is the example committed for newcomers and quoted in
// docs/grants.md.
const exampleFile = "../examples/grants.yaml"

// writeGrants writes text, with $DIR replaced by the directory, as
// grants.yaml in a new directory that also holds the empty directories ws
// and other, and returns the directory.
func writeGrants(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"ws", "other"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	text = strings.ReplaceAll(text, "$DIR", dir)
	if err := os.WriteFile(filepath.Join(dir, "grants.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadExample(t *testing.T) {
	// The example loads as shipped, in place: its ./workspace is
	// examples/workspace, committed with a .gitkeep (issue 15).
	ws, err := filepath.Abs("../examples/workspace")
	if err != nil {
		t.Fatal(err)
	}
	g, err := provide.Load(exampleFile)
	if err != nil {
		t.Fatalf("Load(%s) as shipped: %v", exampleFile, err)
	}
	want := provide.Grants{
		Workspace: ws,
		FS:        &fsroot.Grants{Root: ws, MaxFileBytes: 16 << 20, MaxEntries: 10000},
		Exec: &proc.Grants{
			Root:           ws,
			Allow:          []string{"ls", "grep", "git"},
			Path:           []string{"/usr/local/bin", "/usr/bin", "/bin"},
			Env:            map[string]string{"LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1"},
			AllowEnv:       []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL"},
			Timeout:        30 * time.Second,
			MaxOutputBytes: 1 << 20,
			MaxProcesses:   64,
			Landlock:       proc.LandlockBestEffort,
		},
		Net: &fetch.Grants{
			AllowHosts:       []string{"api.github.com", "*.example.com"},
			Schemes:          []string{"https"},
			Ports:            []int{443},
			AllowCIDRs:       []string{},
			MaxResponseBytes: 8 << 20,
			Timeout:          30 * time.Second,
			MaxRedirects:     5,
		},
		JS: &script.Grants{
			Timeout:        5 * time.Second,
			MaxScriptBytes: 64 << 10,
			MaxArgsBytes:   1 << 20,
			MaxResultBytes: 1 << 20,
			MaxMemoryBytes: 128 << 20,
		},
		Page: &browser.Grants{
			Grants: fetch.Grants{
				AllowHosts:       []string{"docs.example.com"},
				Schemes:          []string{"https"},
				MaxResponseBytes: 8 << 20,
				Timeout:          30 * time.Second,
			},
			MaxScreenshotBytes: 8 << 20,
			Binary:             "/usr/lib/chromium/chromium",
		},
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("Load(example) =\n%s\nwant\n%s", dump(g), dump(want))
	}

	// Moved away from its workspace, the example fails where it names it.
	dir := t.TempDir()
	text, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = provide.Load(path)
	var pe *provide.Error
	if !errors.As(err, &pe) || pe.Field != "workspace" || pe.Line != 8 || pe.Column != 1 {
		t.Errorf("Load(%s) = %v, want an error at 8:1 for workspace", path, err)
	}
}

// dump shows g with its sections.
func dump(g provide.Grants) string {
	var b strings.Builder
	b.WriteString("workspace " + g.Workspace)
	v := reflect.ValueOf(g)
	for i := 1; i < v.NumField(); i++ {
		b.WriteString("\n" + v.Type().Field(i).Name + " ")
		if f := v.Field(i); f.IsNil() {
			b.WriteString("nil")
		} else {
			fmt.Fprintf(&b, "%+v", f.Elem().Interface())
		}
	}
	return b.String()
}

func TestParseErrors(t *testing.T) {
	// In each case $DIR is the directory of grants.yaml, which holds the
	// empty directories ws and other.
	tests := []struct {
		name string
		yaml string
		want string // after "$DIR/grants.yaml:"
	}{
		{"unknown key at top level",
			"workspace: ./ws\nnets:\n  allow_hosts: [api.github.com]\n",
			`2:1: nets: unknown key (want one of workspace, fs, exec, net, js, page)`},
		{"unknown key in a section",
			"js:\n  timeout: 5s\n  max_heap: 1\n",
			`3:3: js.max_heap: unknown key (want one of timeout, max_script_bytes, max_args_bytes, max_result_bytes, max_memory_bytes)`},
		{"unknown key beside inline keys",
			"page:\n  allow_hosts: [docs.example.com]\n  max_redirect: 2\n",
			`3:3: page.max_redirect: unknown key (want one of allow_hosts, schemes, ports, allow_cidrs, max_response_bytes, timeout, max_redirects, max_screenshot_bytes, binary)`},
		{"unknown key in a flow mapping",
			"workspace: ./ws\nfs: {read_only: true, readonly: true}\n",
			`2:23: fs.readonly: unknown key (want one of root, read_only, max_file_bytes, max_entries)`},
		{"wrong type: bool",
			"workspace: ./ws\nfs:\n  read_only: maybe\n",
			`3:3: fs.read_only: want true or false, got "maybe"`},
		{"wrong type: integer",
			"workspace: ./ws\nfs:\n  max_entries: many\n",
			`3:3: fs.max_entries: want an integer, got "many"`},
		{"wrong type: fraction",
			"workspace: ./ws\nfs:\n  max_entries: 1.5\n",
			`3:3: fs.max_entries: 1.5 is not a whole number`},
		{"wrong type: list",
			"net:\n  allow_hosts: api.github.com\n",
			`2:3: net.allow_hosts: want a list, got "api.github.com"`},
		{"wrong type: section",
			"js: 5s\n",
			`1:1: js: want a mapping, got "5s"`},
		{"wrong type: map value",
			"workspace: ./ws\nexec:\n  allow: [ls]\n  env: {LANG: [C]}\n",
			`4:9: exec.env.LANG: want a string, got a list`},
		{"wrong type: document",
			"- fs\n- js\n",
			`1:1: want a mapping of sections (workspace, fs, exec, net, js, page), got a list`},
		{"invalid duration",
			"js:\n  timeout: 5 seconds\n",
			`2:3: js.timeout: "5 seconds" is not a duration (write one such as 500ms, 30s or 1m30s)`},
		{"duration without a unit",
			"workspace: ./ws\nexec:\n  allow: [ls]\n  timeout: 30\n",
			`4:3: exec.timeout: 30 has no unit (write a duration such as 30s)`},
		{"star host",
			"net:\n  allow_hosts:\n    - api.github.com\n    - \"*\"\n",
			`4:7: net.allow_hosts[1]: "*": "*" would allow every host; list the hosts`},
		{"public suffix wildcard",
			"net: {allow_hosts: [api.github.com, \"*.com\"]}\n",
			`1:37: net.allow_hosts[1]: "*.com": "com" is a public suffix: a wildcard over it allows names anyone can register`},
		{"star host in page",
			"page:\n  allow_hosts: [\"*\"]\n",
			`2:17: page.allow_hosts[0]: "*": "*" would allow every host; list the hosts`},
		{"exec allow_env LD_PRELOAD",
			"workspace: ./ws\nexec:\n  allow: [git]\n  allow_env: [GOFLAGS, LD_PRELOAD]\n",
			`4:24: exec.allow_env[1]: LD_PRELOAD is a dynamic-loader variable; it is never allowed`},
		{"exec env LD_PRELOAD",
			"workspace: ./ws\nexec:\n  allow: [git]\n  env:\n    LANG: C\n    LD_PRELOAD: /tmp/x.so\n",
			`6:5: exec.env.LD_PRELOAD: LD_PRELOAD is a dynamic-loader variable; it is never allowed`},
		{"negative file size",
			"workspace: ./ws\nfs:\n  max_file_bytes: -1\n",
			`3:3: fs.max_file_bytes: must not be negative (0 means the default, 16777216)`},
		{"negative response size",
			"net:\n  allow_hosts: [api.github.com]\n  max_response_bytes: -5\n",
			`3:3: net.max_response_bytes: -5: must not be negative`},
		{"negative script size",
			"js: {max_script_bytes: -1}\n",
			`1:6: js.max_script_bytes: -1: must not be negative`},
		{"missing required key",
			"net:\n  timeout: 5s\n",
			`1:1: net.allow_hosts: list at least one host`},
		{"workspace missing",
			"workspace: ./missing\nfs: {}\n",
			`1:1: workspace: directory "$DIR/missing" does not exist`},
		{"workspace not a directory",
			"workspace: ./grants.yaml\n",
			`1:1: workspace: "$DIR/grants.yaml" is not a directory`},
		{"no root and no workspace",
			"fs: {read_only: true}\n",
			`1:1: fs.root: required when there is no workspace: name the directory the fs handle is confined to`},
		{"exec root outside the fs root",
			"workspace: ./ws\nfs: {}\nexec:\n  root: ./other\n  allow: [ls]\n",
			`4:3: exec.root: "$DIR/other" is outside the fs root "$DIR/ws": exec would reach files the fs handle cannot; use a directory inside it`},
		{"exec root outside the workspace",
			"workspace: ./ws\nexec:\n  root: ./other\n  allow: [ls]\n",
			`3:3: exec.root: "$DIR/other" is outside the workspace "$DIR/ws": exec would reach files the fs handle cannot; use a directory inside it`},
		{"exec program inside a writable fs root",
			"workspace: .\nfs: {}\nexec:\n  root: ./ws\n  allow:\n    - ls\n    - $DIR/other/tool\n",
			`7:7: exec.allow[1]: "$DIR/other/tool" is inside the fs root, where tools can replace it through the fs handle`},
		{"exec path inside a writable fs root",
			"workspace: .\nfs: {}\nexec:\n  root: ./ws\n  allow: [ls]\n  path: [/usr/bin, $DIR/other]\n",
			`6:20: exec.path[1]: "$DIR/other" is inside the fs root, where tools can plant programs through the fs handle`},
		{"exec default path inside a writable fs root",
			"workspace: /\nfs: {}\nexec:\n  root: $DIR/ws\n  allow: [ls]\n",
			`3:1: exec.path: the default lookup path /usr/local/bin:/usr/bin:/bin is inside the fs root, where tools can plant programs through the fs handle; list directories outside it`},
		{"page max_redirects",
			"page:\n  allow_hosts: [docs.example.com]\n  max_redirects: 2\n",
			`3:3: page.max_redirects: not used by the page handle: Chromium follows redirects, and each one is checked against allow_hosts like any request; remove it`},
		{"alias to the wrong kind of section",
			"net: &n\n  allow_hosts: [api.github.com]\njs: *n\n",
			`3:1: js.allow_hosts: unknown key (want one of timeout, max_script_bytes, max_args_bytes, max_result_bytes, max_memory_bytes)`},
		{"alias to a list where a string is wanted",
			"net:\n  allow_hosts: &h [api.github.com]\n  schemes: [*h]\n",
			`3:13: net.schemes[0]: want a string, got a list`},
		{"a YAML tag, refused before decoding",
			"workspace: ./ws\nfs:\n  read_only: !!str true\n",
			`3:14: YAML tags (!!str) are not allowed here (a grants file needs none)`},
		{"a tagged empty value (crashed goccy/go-yaml's decoder)",
			"exec:\n  allow: !000 \n",
			`2:10: YAML tags (!000) are not allowed here (a grants file needs none)`},
		{"unknown key in a merged mapping",
			"net:\n  allow_hosts: [api.github.com]\n  <<: {timeout: 5s, retries: 3}\n",
			`3:21: net.retries: unknown key (want one of allow_hosts, schemes, ports, allow_cidrs, max_response_bytes, timeout, max_redirects)`},
		{"syntax error",
			"net: {allow_hosts: [api.github.com}\n",
			`1:35: ',' or ']' must be specified`},
		{"duplicate key",
			"js: {}\njs: {}\n",
			`2:1: mapping key "js" already defined at [1:1]`},
		{"two documents",
			"js: {}\n---\nnet: {}\n",
			`2:1: a second YAML document: a grants file holds one`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeGrants(t, tt.yaml)
			path := filepath.Join(dir, "grants.yaml")
			_, err := provide.Load(path)
			want := strings.ReplaceAll(path+":"+tt.want, "$DIR", dir)
			if err == nil || err.Error() != want {
				t.Fatalf("Load error =\n%v\nwant\n%s", err, want)
			}
			var pe *provide.Error
			if !errors.As(err, &pe) || pe.File != path {
				t.Errorf("error %T does not name the file %s", err, path)
			}
		})
	}
}

func TestParseErrorCause(t *testing.T) {
	_, err := provide.Parse([]byte("net:\n  allow_hosts: [\"*\"]\n"), "grants.yaml")
	var fe *grant.FieldError
	if !errors.As(err, &fe) || fe.Field != "net.allow_hosts[0]" {
		t.Errorf("error %v does not wrap the *grant.FieldError for net.allow_hosts[0]", err)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, dir string, g provide.Grants)
	}{
		{"empty file provides nothing", "", func(t *testing.T, _ string, g provide.Grants) {
			if !reflect.DeepEqual(g, provide.Grants{}) {
				t.Errorf("grants = %s", dump(g))
			}
		}},
		{"a comment only provides nothing", "# nothing yet\n", func(t *testing.T, _ string, g provide.Grants) {
			if len(g.Kinds()) != 0 {
				t.Errorf("kinds = %v", g.Kinds())
			}
		}},
		{"a section with no value is provided with defaults", "js:\nnet: {allow_hosts: [api.github.com]}\n", func(t *testing.T, _ string, g provide.Grants) {
			if g.JS == nil || *g.JS != (script.Grants{}) {
				t.Errorf("js = %+v, want the zero grants", g.JS)
			}
			if got := g.Kinds(); !reflect.DeepEqual(got, kinds("net", "js")) {
				t.Errorf("kinds = %v", got)
			}
		}},
		{"roots default to the workspace", "workspace: ws\nfs: {}\nexec: {allow: [ls]}\n", func(t *testing.T, dir string, g provide.Grants) {
			ws := filepath.Join(dir, "ws")
			if g.Workspace != ws || g.FS.Root != ws || g.Exec.Root != ws {
				t.Errorf("workspace %q, fs.root %q, exec.root %q; want all %q", g.Workspace, g.FS.Root, g.Exec.Root, ws)
			}
		}},
		{"relative paths resolve against the file", "fs: {root: ./other}\nexec: {root: other, allow: [ls]}\npage: {allow_hosts: [docs.example.com], binary: bin/chromium}\n", func(t *testing.T, dir string, g provide.Grants) {
			other := filepath.Join(dir, "other")
			if g.FS.Root != other || g.Exec.Root != other || g.Page.Binary != filepath.Join(dir, "bin/chromium") {
				t.Errorf("fs.root %q, exec.root %q, page.binary %q", g.FS.Root, g.Exec.Root, g.Page.Binary)
			}
		}},
		{"exec root inside the fs root", "workspace: .\nfs: {read_only: true}\nexec: {root: ws, allow: [ls]}\n", func(t *testing.T, dir string, g provide.Grants) {
			if g.Exec.Root != filepath.Join(dir, "ws") {
				t.Errorf("exec.root %q", g.Exec.Root)
			}
		}},
		{"a read-only fs root may hold programs", "workspace: /\nfs: {read_only: true}\nexec: {root: $DIR/ws, allow: [ls]}\n", func(t *testing.T, _ string, g provide.Grants) {
			if g.Exec == nil {
				t.Error("no exec section")
			}
		}},
		{"durations, anchors and aliases", "net: &hosts\n  allow_hosts: [docs.example.com]\n  timeout: 1m30s\npage: *hosts\n", func(t *testing.T, _ string, g provide.Grants) {
			if g.Net.Timeout != 90*time.Second || g.Page == nil || g.Page.Timeout != 90*time.Second {
				t.Errorf("net %+v, page %+v", g.Net, g.Page)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeGrants(t, tt.yaml)
			g, err := provide.Load(filepath.Join(dir, "grants.yaml"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, dir, g)
		})
	}
}

// TestDocs keeps docs/grants.md in step with the code: it quotes the
// example file whole, and documents every key of every section.
func TestDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/grants.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(example)+"```\n") {
		t.Errorf("docs/grants.md does not quote %s whole in a yaml block", exampleFile)
	}
	// Each section is a "## `name`" part of the document whose table
	// lists its keys.
	parts := map[string]string{}
	for _, part := range strings.Split(string(doc), "\n## ") {
		if name, rest, ok := strings.Cut(part, "\n"); ok {
			parts[name] = rest
		}
	}
	top := reflect.TypeFor[provide.Grants]()
	for i := range top.NumField() {
		f := top.Field(i)
		section, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		part, ok := parts["`"+section+"`"]
		if !ok {
			t.Errorf("docs/grants.md has no section \"## `%s`\"", section)
			continue
		}
		if f.Type.Kind() != reflect.Pointer {
			continue
		}
		for _, key := range keysOf(f.Type.Elem()) {
			if !strings.Contains(part, "| `"+key+"` |") {
				t.Errorf("docs/grants.md does not document %s.%s in its table", section, key)
			}
		}
	}
}

// keysOf returns the YAML keys of struct type t, following inline structs.
func keysOf(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if opts == "inline" {
			keys = append(keys, keysOf(t.Field(i).Type)...)
			continue
		}
		keys = append(keys, name)
	}
	return keys
}
