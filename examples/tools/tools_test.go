package tools_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/examples/tools/apicall"
	"github.com/brainrt/brain/examples/tools/execrun"
	"github.com/brainrt/brain/examples/tools/fsread"
	"github.com/brainrt/brain/examples/tools/fssearch"
	"github.com/brainrt/brain/examples/tools/jseval"
	"github.com/brainrt/brain/examples/tools/netfetchjson"
	"github.com/brainrt/brain/examples/tools/pagetext"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/fetch"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/provide/script"
	"github.com/brainrt/brain/tool"
)

// harness holds the artifacts of every example tool, built once by
// TestMain, and the one host (and compilation cache) every test shares.
var harness *toolstest.Harness

// site is the loopback HTTP server of the net, api and page tests, started
// by TestMain: its handlers are in siteMux.
var site *httptest.Server

// examplePackages are the tool packages under examples/tools: brain build
// of ./examples/tools/... must build exactly these (and skip toolstest).
var examplePackages = []string{
	"github.com/brainrt/brain/examples/tools/apicall",
	"github.com/brainrt/brain/examples/tools/execrun",
	"github.com/brainrt/brain/examples/tools/fsread",
	"github.com/brainrt/brain/examples/tools/fssearch",
	"github.com/brainrt/brain/examples/tools/jseval",
	"github.com/brainrt/brain/examples/tools/netfetchjson",
	"github.com/brainrt/brain/examples/tools/pagetext",
}

func TestMain(m *testing.M) {
	// First: as root, every exec.run command starts as this binary in
	// helper mode, which must not build anything.
	proc.RunHelperIfRequested()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	start := time.Now()
	// A cold build cache compiles the standard library for wasip1 first.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	h, err := toolstest.Build(ctx, toolstest.Options{Dir: "../..", Patterns: []string{"./examples/tools/..."}})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the example tools:", err)
		return 1
	}
	defer h.Close()
	harness = h
	twinDir, err := os.MkdirTemp("", "brain-twins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(twinDir)
	ctx, cancel = context.WithTimeout(context.Background(), 4*time.Minute)
	err = buildTwins(ctx, twinDir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the TypeScript twins of the example tools:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "built %d example artifacts in %v\n", len(h.Built()), time.Since(start).Round(time.Millisecond))
	}
	site = httptest.NewServer(siteMux())
	defer site.Close()
	defer closeBrowser()
	return m.Run()
}

// TestBuildSkipsHarness: brain build of ./examples/tools/... builds every
// example tool and skips the packages that export no Tool (toolstest).
func TestBuildSkipsHarness(t *testing.T) {
	var got []string
	for _, a := range harness.Built() {
		got = append(got, a.Package)
		if len(a.Unused) > 0 {
			t.Errorf("%s declares handles its code never uses: %v", a.Manifest.Name, a.Unused)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, examplePackages) {
		t.Errorf("built %v\nwant  %v", got, examplePackages)
	}
}

// TestManifests: the artifact of every example tool carries the manifest
// of its Go tool (payload identity aside).
func TestManifests(t *testing.T) {
	native := map[string]tool.Attachable{}
	for _, n := range []tool.Attachable{apicall.Tool, execrun.Tool, fsread.Tool, fssearch.Tool, jseval.Tool, netfetchjson.Tool, pagetext.Tool} {
		native[n.Manifest().Name] = n
	}
	for _, b := range harness.Built() {
		t.Run(b.Manifest.Name, func(t *testing.T) {
			a, err := harness.Artifact(b.Manifest.Name)
			if err != nil {
				t.Fatal(err)
			}
			n := native[b.Manifest.Name]
			if n == nil {
				t.Fatalf("no Go tool named %q", b.Manifest.Name)
			}
			if diff := toolstest.ManifestDiff(n.Manifest(), a.Manifest()); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// newWorkspace returns an empty workspace directory that exec'd programs
// can use: when the tests run as root, programs run as nobody.
func newWorkspace(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, proc.DefaultUser, proc.DefaultUser); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeFiles writes files (name → content) under dir, making directories.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := dir + "/" + name
		if err := os.MkdirAll(p[:strings.LastIndex(p, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fsProvider provides the fs handle over root.
func fsProvider(g fsroot.Grants) kernel.Provider {
	return kernel.Provider{Kind: handle.KindFS, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		fs, err := fsroot.New(g)
		if err != nil {
			return nil, err
		}
		return kernel.Static(fs, fs.Close), nil
	}}
}

// execProvider provides the exec handle under g. Off root the child keeps
// the network: only root can give it an empty network namespace.
func execProvider(g proc.Grants) kernel.Provider {
	if os.Geteuid() != 0 {
		g.Network = true
	}
	return kernel.Provider{Kind: handle.KindExec, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		e, err := proc.New(g, nil)
		if err != nil {
			return nil, err
		}
		return kernel.Static(e, e.Close), nil
	}}
}

// testResolver resolves the tests' host names: api.test to the site's
// address, internal.test to a loopback address no grant allows. Nothing
// else resolves, so no test reaches beyond this machine.
type testResolver struct{}

func (testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch strings.ToLower(strings.TrimSuffix(host, ".")) {
	case "api.test":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case "internal.test":
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// siteGrants allow http://api.test:<site port> (127.0.0.1) and
// internal.test by name; internal.test's address stays denied.
func siteGrants() fetch.Grants {
	return fetch.Grants{
		AllowHosts: []string{"api.test", "internal.test"},
		Schemes:    []string{"http"},
		Ports:      []int{site.Listener.Addr().(*net.TCPAddr).Port},
		AllowCIDRs: []string{"127.0.0.1/32"},
	}
}

// siteURL returns the URL of path on the site, by its allowed name.
func siteURL(path string) string {
	return fmt.Sprintf("http://api.test:%d%s", site.Listener.Addr().(*net.TCPAddr).Port, path)
}

// netProvider provides the net handle under g, with the test resolver.
func netProvider(g fetch.Grants) kernel.Provider {
	return kernel.Provider{Kind: handle.KindNet, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		f, err := fetch.New(g, &fetch.Options{Resolver: testResolver{}})
		if err != nil {
			return nil, err
		}
		return kernel.Static(f, f.Close), nil
	}}
}

// jsProvider provides the js handle under g.
func jsProvider(g script.Grants) kernel.Provider {
	return kernel.Provider{Kind: handle.KindJS, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		r, err := script.New(g, nil)
		if err != nil {
			return nil, err
		}
		return kernel.Static(r, nil), nil
	}}
}

// One Chromium serves every page test of the binary (it takes about half a
// second to start); the first test that needs it starts it, TestMain stops
// it.
var chromium struct {
	once     sync.Once
	provider *browser.Provider
	err      error
}

// sharedBrowser returns the test binary's browser, allowed to load the
// site, or skips the test when Chromium is not installed.
func sharedBrowser(t testing.TB) *browser.Provider {
	t.Helper()
	if _, err := os.Stat(browser.DefaultBinary); errors.Is(err, os.ErrNotExist) {
		t.Skipf("Chromium is not installed at %s (test.sh installs Debian's chromium)", browser.DefaultBinary)
	}
	chromium.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		chromium.provider, chromium.err = browser.New(ctx, browser.Grants{Grants: siteGrants()},
			&browser.Options{Resolver: testResolver{}})
	})
	if chromium.err != nil {
		t.Fatalf("starting Chromium: %v", chromium.err)
	}
	return chromium.provider
}

func closeBrowser() {
	if chromium.provider != nil {
		_ = chromium.provider.Close()
	}
}

// pageProvider provides the page handle from the shared browser: a tab per
// call, closed when the call ends. The browser outlives the environment.
func pageProvider(b *browser.Provider) kernel.Provider {
	return kernel.Provider{Kind: handle.KindPage, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		return tabs{b}, nil
	}}
}

type tabs struct{ b *browser.Provider }

func (s tabs) Acquire(ctx context.Context) (any, func(), error) {
	pg, err := s.b.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	return pg, func() { _ = pg.Close() }, nil
}

func (tabs) Close() error { return nil }

// siteMux serves the pages and JSON documents of the net, api and page
// tests.
func siteMux() *http.ServeMux {
	mux := http.NewServeMux()
	serve := func(path, contentType, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write([]byte(body))
		})
	}
	serve("/items.json", "application/json", `{"items":[{"id":9007199254740993,"name":"a"},{"id":2,"name":"b"}],"total":2.50}`)
	serve("/problem.json", "application/problem+json", `{"title":"gone"}`)
	serve("/page.html", "text/html; charset=utf-8", `<!doctype html><html><head><title>t</title></head><body><h1>Hello, brain</h1><p class="price">42 €</p><main>first line<br>second line</main></body></html>`)
	serve("/lies.json", "application/json", `<html>not json</html>`)
	serve("/two.json", "application/json", `{"a":1} {"b":2}`)
	serve("/text", "text/plain", "plain text, not JSON")
	mux.HandleFunc("/missing.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no such item"}`))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/items.json", http.StatusFound)
	})
	mux.HandleFunc("/redirect-to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("url"), http.StatusFound)
	})
	apiRoutes(mux)
	return mux
}
