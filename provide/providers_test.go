package provide_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/tool"
)

// TestMain installs the exec helper (see proc.RunHelperIfRequested):
// where ptrace is not allowed, exec starts commands through this binary.
func TestMain(m *testing.M) {
	proc.RunHelperIfRequested()
	os.Exit(m.Run())
}

func kinds(names ...string) []handle.Kind {
	ks := []handle.Kind{}
	for _, n := range names {
		ks = append(ks, handle.Kind(n))
	}
	return ks
}

// execNetwork is the exec grant's network value the tests can use: false
// (a network namespace per command) needs root.
func execNetwork() string { return strconv.FormatBool(os.Geteuid() != 0) }

// setUp loads the grants file in dir, builds an environment from
// Providers the way the package doc shows, and sets it up.
func setUp(t *testing.T, dir string) (*kernel.Environment, kernel.SetupReceipt) {
	t.Helper()
	g, err := provide.Load(filepath.Join(dir, "grants.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	env := kernel.New(nil)
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	for _, p := range provide.Providers(g, nil) {
		if err := env.Provide(p); err != nil {
			t.Fatal(err)
		}
	}
	return env, env.Setup(context.Background())
}

type failure struct {
	name string
	code protocol.Code
}

func failures(rec kernel.SetupReceipt) []failure {
	fs := []failure{}
	for _, f := range rec.Failures {
		fs = append(fs, failure{f.Name, f.Code})
	}
	return fs
}

func TestSetupProvidesConfigured(t *testing.T) {
	fs := "workspace: ./ws\nfs: {}\n"
	exec := "exec: {allow: [ls], network: " + execNetwork() + "}\n"
	net := "net: {allow_hosts: [api.github.com]}\n"
	js := "js: {timeout: 2s}\n"
	page := "page: {allow_hosts: [docs.example.com], binary: ./no-chromium}\n"
	tests := []struct {
		name     string
		yaml     string
		provides []handle.Kind
		failures []failure
	}{
		{"nothing", "", kinds(), []failure{}},
		{"js", js, kinds("js"), []failure{}},
		{"fs and exec", fs + exec, kinds("exec", "fs"), []failure{}},
		{"fs, exec, net and js", fs + exec + net + js, kinds("exec", "fs", "js", "net"), []failure{}},
		{"page without its browser", fs + exec + net + js + page, kinds("exec", "fs", "js", "net"), []failure{{"page", protocol.CodeUnavailable}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rec := setUp(t, writeGrants(t, tt.yaml))
			if !reflect.DeepEqual(rec.Provides, tt.provides) {
				t.Errorf("provides = %v, want %v", rec.Provides, tt.provides)
			}
			if got := failures(rec); !reflect.DeepEqual(got, tt.failures) {
				t.Errorf("failures = %+v, want %+v (receipt %+v)", got, tt.failures, rec)
			}
		})
	}
}

func TestSetupPageUnavailable(t *testing.T) {
	dir := writeGrants(t, "js: {}\npage:\n  allow_hosts: [docs.example.com]\n  binary: $DIR/bogus/chromium\n")
	_, rec := setUp(t, dir)
	if want := kinds("js"); !reflect.DeepEqual(rec.Provides, want) {
		t.Errorf("provides = %v, want %v", rec.Provides, want)
	}
	if len(rec.Failures) != 1 {
		t.Fatalf("failures = %+v, want one for page", rec.Failures)
	}
	f := rec.Failures[0]
	if f.Name != "page" || f.Code != protocol.CodeUnavailable || !strings.Contains(f.Reason, filepath.Join(dir, "bogus/chromium")) {
		t.Errorf("failure = %+v, want page, unavailable, naming the binary", f)
	}
}

// TestSetupChecksAgain: Open checks the grants again, so a workspace that
// vanished after Load fails setup for the sections that use it only.
func TestSetupChecksAgain(t *testing.T) {
	dir := writeGrants(t, "workspace: ./ws\nfs: {}\njs: {}\n")
	g, err := provide.Load(filepath.Join(dir, "grants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ws")); err != nil {
		t.Fatal(err)
	}
	env, rec, err := provide.Environment(context.Background(), provide.Grants{FS: g.FS, JS: g.JS}, nil)
	if err == nil {
		_ = env.Close()
		t.Fatalf("Environment: receipt %+v, want an error for the missing root", rec)
	}
	env = kernel.New(nil)
	defer env.Close()
	for _, p := range provide.Providers(g, nil) {
		if err := env.Provide(p); err != nil {
			t.Fatal(err)
		}
	}
	rec = env.Setup(context.Background())
	if want := kinds("js"); !reflect.DeepEqual(rec.Provides, want) {
		t.Errorf("provides = %v, want %v", rec.Provides, want)
	}
	want := fmt.Sprintf("grants: workspace: directory %q does not exist", filepath.Join(dir, "ws"))
	if len(rec.Failures) != 1 || rec.Failures[0].Name != "fs" || rec.Failures[0].Reason != want {
		t.Errorf("failures = %+v, want fs: %s", rec.Failures, want)
	}
}

func TestEnvironment(t *testing.T) {
	tests := []struct {
		name     string
		grants   provide.Grants
		wantErr  string
		provides []handle.Kind
	}{
		{"valid", provide.Grants{JS: mustParse(t, "js: {}\n").JS}, "", kinds("js")},
		{"net", provide.Grants{Net: mustParse(t, "net: {allow_hosts: [a.example.com]}\n").Net}, "", kinds("net")},
		{"star host", func() provide.Grants {
			g := mustParse(t, "net: {allow_hosts: [a.example.com]}\n")
			g.Net.AllowHosts = []string{"*"}
			return g
		}(), `grants: net.allow_hosts[0]: "*": "*" would allow every host; list the hosts`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, rec, err := provide.Environment(context.Background(), tt.grants, &kernel.Options{ID: "test"})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			if rec.Environment != "test" || !reflect.DeepEqual(rec.Provides, tt.provides) {
				t.Errorf("receipt = %+v, want environment test providing %v", rec, tt.provides)
			}
		})
	}
}

func mustParse(t *testing.T, text string) provide.Grants {
	t.Helper()
	g, err := provide.Parse([]byte(text), "grants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Providers copies the grants: changing them after the call changes
// nothing the providers enforce.
func TestProvidersCopyGrants(t *testing.T) {
	g := mustParse(t, "net: {allow_hosts: [a.example.com]}\n")
	ps := provide.Providers(g, nil)
	g.Net.AllowHosts[0] = "*"
	env := kernel.New(nil)
	defer env.Close()
	for _, p := range ps {
		if err := env.Provide(p); err != nil {
			t.Fatal(err)
		}
	}
	if rec := env.Setup(context.Background()); !reflect.DeepEqual(rec.Provides, kinds("net")) {
		t.Errorf("receipt = %+v, want net provided", rec)
	}
}

type allHandles struct {
	FS   handle.FS
	Exec handle.Exec
	Net  handle.Net
	JS   handle.JS
}

// useAll reads a file through fs, runs cat on it through exec, fetches a
// URL through net and doubles a number through js.
var useAll = tool.New(tool.Spec{Name: "use.all", Description: "Uses every handle but page."},
	func(ctx *tool.Context[allHandles, tool.None], in struct {
		URL string `json:"url"`
	}) ([]string, error) {
		data, err := ctx.Handles.FS.ReadFile(ctx, "hello.txt")
		if err != nil {
			return nil, err
		}
		res, err := ctx.Handles.Exec.Run(ctx, handle.Command{Program: "cat", Args: []string{"hello.txt"}})
		if err != nil {
			return nil, err
		}
		resp, err := ctx.Handles.Net.Fetch(ctx, handle.Request{URL: in.URL})
		if err != nil {
			return nil, err
		}
		out, err := ctx.Handles.JS.Call(ctx, `(a) => a.n * 2`, json.RawMessage(`{"n": 21}`))
		if err != nil {
			return nil, err
		}
		return []string{string(data), string(res.Stdout), string(resp.Body), string(out)}, nil
	})

// TestProvidedHandlesWork calls a tool that uses the handles an
// environment built from grants provides.
func TestProvidedHandlesWork(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "from net")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	dir := writeGrants(t, fmt.Sprintf(`workspace: ./ws
fs: {}
exec: {allow: [cat], network: %s}
net: {allow_hosts: [127.0.0.1], schemes: [http], ports: [%d], allow_cidrs: [127.0.0.1/32]}
js: {}
`, execNetwork(), port))
	ws := filepath.Join(dir, "ws")
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Commands run as nobody, who must enter the workspace.
		if err := os.Chown(ws, proc.DefaultUser, proc.DefaultUser); err != nil {
			t.Fatal(err)
		}
	}
	env, rec := setUp(t, dir)
	if len(rec.Failures) != 0 {
		t.Fatalf("setup failures: %+v", rec.Failures)
	}
	if ar := env.Attach(context.Background(), kernel.Attachment{Tool: useAll}); !ar.OK() {
		t.Fatalf("attach: %+v", ar.Failures)
	}
	out := env.Invoke(context.Background(), "use.all", kernel.Call{Input: json.RawMessage(`{"url": "` + srv.URL + `/"}`)})
	if out.Err != nil {
		t.Fatalf("invoke: %+v", out.Err)
	}
	if got, want := string(out.Value), `["hello","hello","from net","42"]`; got != want {
		t.Errorf("value = %s, want %s", got, want)
	}
}

type pageHandles struct{ Page handle.Page }

// countTab counts calls in the page it is given: a fresh tab says 1.
var countTab = tool.New(tool.Spec{Name: "page.count", Description: "Counts calls in its tab."},
	func(ctx *tool.Context[pageHandles, tool.None], in struct{}) (json.RawMessage, error) {
		return ctx.Handles.Page.Evaluate(ctx, `window.calls = (window.calls || 0) + 1`)
	})

// TestPageTabPerCall needs Chromium; TestSetupPageUnavailable covers the
// page section without it.
func TestPageTabPerCall(t *testing.T) {
	if _, err := os.Stat(browser.DefaultBinary); err != nil && os.Getenv("CI") == "" {
		t.Skipf("no Chromium at %s (./test.sh installs it; under CI this fails)", browser.DefaultBinary)
	}
	env, rec := setUp(t, writeGrants(t, "page: {allow_hosts: [docs.example.com]}\n"))
	if !reflect.DeepEqual(rec.Provides, kinds("page")) {
		t.Fatalf("receipt = %+v", rec)
	}
	if ar := env.Attach(context.Background(), kernel.Attachment{Tool: countTab}); !ar.OK() {
		t.Fatalf("attach: %+v", ar.Failures)
	}
	for i := range 2 {
		out := env.Invoke(context.Background(), "page.count", kernel.Call{Input: json.RawMessage(`{}`)})
		if out.Err != nil || string(out.Value) != "1" {
			t.Errorf("call %d: %s %+v, want 1 (a tab of its own)", i, out.Value, out.Err)
		}
	}
}

// TestExampleSetsUp: examples/grants.yaml, as shipped and in place, sets
// up every section it names, as `brain run --grants` and `brain serve`
// (whose config names a grants file) do through Environment. Its exec
// grant cuts programs off the network, which needs root; its page grant
// needs Chromium.
func TestExampleSetsUp(t *testing.T) {
	g, err := provide.Load(exampleFile)
	if err != nil {
		t.Fatalf("Load(%s): %v", exampleFile, err)
	}
	env, rec, err := provide.Environment(context.Background(), g, &kernel.Options{ID: "example"})
	if err != nil {
		t.Fatalf("Environment: %v", err)
	}
	defer env.Close()
	want := kinds("exec", "fs", "js", "net", "page")
	wantFailures := []failure{}
	if os.Geteuid() != 0 {
		want = kinds("fs", "js", "net", "page")
		wantFailures = append(wantFailures, failure{"exec", protocol.CodeUnavailable})
	}
	if _, err := os.Stat(browser.DefaultBinary); err != nil {
		want = slices.DeleteFunc(want, func(k handle.Kind) bool { return k == handle.KindPage })
		wantFailures = append(wantFailures, failure{"page", protocol.CodeUnavailable})
	}
	if !reflect.DeepEqual(rec.Provides, want) {
		t.Errorf("provides = %v, want %v (failures %+v)", rec.Provides, want, rec.Failures)
	}
	if got := failures(rec); len(got) != len(wantFailures) {
		t.Errorf("failures = %+v, want %+v", rec.Failures, wantFailures)
	}
}
