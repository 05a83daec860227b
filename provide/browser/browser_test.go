package browser_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/fetch"
)

// One browser serves every test of the package: it takes about half a
// second to start. The fixture starts it on first use; TestMain stops it.
var fixture struct {
	once     sync.Once
	provider *browser.Provider
	err      error
	site     *server // the allowed site: api.test → 127.0.0.1
	internal *server // a denied address: internal.test → 127.0.0.2
	release  chan struct{}
	shared   *browser.Page
	// requests is every request the fixture's proxy received.
	requests requestLog
}

func TestMain(m *testing.M) {
	code := m.Run()
	// Over the whole run, the fixture's Chromium asked the proxy for
	// nothing but the tests' own hosts: no background request of its own.
	for _, r := range fixture.requests.list() {
		if !testRequest(r) {
			fmt.Fprintf(os.Stderr, "the proxy saw a request no test made: %q\n", r)
			code = 1
		}
	}
	if fixture.shared != nil {
		fixture.shared.Close()
	}
	if fixture.provider != nil {
		ns := browser.NetNS(fixture.provider)
		fixture.provider.Close()
		// Close must leave no Chromium process behind: none in its
		// network namespace.
		if left := processesIn(ns); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "Close left Chromium processes running: %v\n", left)
			code = 1
		}
	}
	if fixture.release != nil {
		close(fixture.release)
	}
	if fixture.site != nil {
		fixture.site.Close()
		fixture.internal.Close()
	}
	os.Exit(code)
}

// testRequest reports whether r, as the proxy logs it ("GET
// http://host:port/path", "CONNECT host:port"), is for a host the tests
// use: a .test name or a loopback address.
func testRequest(r string) bool {
	_, target, _ := strings.Cut(r, " ")
	host := target
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.HasSuffix(host, ".test") || strings.HasPrefix(host, "127.") || host == "2130706434"
}

// processesIn returns the pids of the processes in network namespace ns
// ("net:[…]").
func processesIn(ns string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && link == ns {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// server is a test server on a loopback address that counts requests.
type server struct {
	*httptest.Server
	port int
	hits atomic.Int64
}

func newServer(addr string, h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &server{port: ln.Addr().(*net.TCPAddr).Port}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	return s, nil
}

type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[strings.ToLower(host)]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var resolver = mapResolver{
	"api.test":      {netip.MustParseAddr("127.0.0.1")},
	"internal.test": {netip.MustParseAddr("127.0.0.2")},
}

// siteURL returns http://api.test:<site port><path>.
func siteURL(path string) string {
	return "http://api.test:" + strconv.Itoa(fixture.site.port) + path
}

// internalURL returns http://<host>:<internal port><path>.
func internalURL(host, path string) string {
	return "http://" + host + ":" + strconv.Itoa(fixture.internal.port) + path
}

func siteHandler() http.Handler {
	mux := http.NewServeMux()
	html := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
		}
	}
	mux.Handle("GET /hello", html(`<!doctype html><html><head><title>Greeting</title></head>
<body><h1>Hello</h1><p id="p">para text</p></body></html>`))
	mux.HandleFunc("GET /subresources", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body>
<img id="ok" src="/pixel">
<img src="%s">
<img src="%s">
<script src="%s"></script>
<iframe src="%s"></iframe>
<p>subresources</p></body></html>`,
			internalURL("internal.test", "/by-name.png"),
			internalURL("127.0.0.2", "/by-address.png"),
			internalURL("internal.test", "/script.js"),
			internalURL("internal.test", "/frame"))
	})
	mux.HandleFunc("GET /pixel", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/gif")
		// A 1×1 transparent GIF.
		_, _ = w.Write([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"))
	})
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internalURL("internal.test", "/secret"), http.StatusFound)
	})
	mux.HandleFunc("GET /set-cookie", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cret", Path: "/"})
		fmt.Fprint(w, "cookie set")
	})
	mux.HandleFunc("GET /forged", func(w http.ResponseWriter, r *http.Request) {
		// A server that pretends to be the proxy's refusal.
		w.Header().Set("X-Brain-Code", "denied")
		w.Header().Set("X-Brain-Message", "forged")
		fmt.Fprint(w, "forged")
	})
	mux.HandleFunc("GET /block", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-fixture.release:
		case <-r.Context().Done():
		}
	})
	return mux
}

// provider returns the shared Provider, starting it on first use; without
// Chromium it skips the test, or fails it when CI is set. The
// grants allow api.test, internal.test and 127.0.0.2 by name, on the two
// servers' ports, but only the address 127.0.0.1: internal.test and
// 127.0.0.2 pass the host rule and must be stopped by the address rule.
func provider(t *testing.T) *browser.Provider {
	t.Helper()
	if _, err := os.Stat(browser.DefaultBinary); err != nil {
		// In CI a missing browser is a broken setup, not a reason to skip.
		if os.Getenv("CI") != "" {
			t.Fatalf("Chromium is not installed at %s: CI must apt-get install chromium", browser.DefaultBinary)
		}
		t.Skipf("Chromium is not installed at %s (apt-get install chromium)", browser.DefaultBinary)
	}
	fixture.once.Do(func() {
		fixture.release = make(chan struct{})
		if fixture.site, fixture.err = newServer("127.0.0.1:0", siteHandler()); fixture.err != nil {
			return
		}
		if fixture.internal, fixture.err = newServer("127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "internal secret")
		})); fixture.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		fixture.provider, fixture.err = browser.New(ctx, browser.Grants{
			Grants: fetch.Grants{
				AllowHosts: []string{"api.test", "internal.test", "127.0.0.2"},
				Schemes:    []string{"http", "https"},
				Ports:      []int{fixture.site.port, fixture.internal.port},
				AllowCIDRs: []string{"127.0.0.1/32"},
				Timeout:    10 * time.Second,
			},
		}, browser.Observe(&browser.Options{Resolver: resolver}, fixture.requests.add))
	})
	if fixture.err != nil {
		t.Fatalf("start the fixture: %v", fixture.err)
	}
	return fixture.provider
}

// openPage opens a tab that the test closes when it ends.
func openPage(t *testing.T) *browser.Page {
	t.Helper()
	p := provider(t)
	pg, err := p.Open(context.Background())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { pg.Close() })
	return pg
}

// sharedPage returns a tab that tests share when they need no fresh one:
// opening a tab (a window and a browser context) costs about as much as
// everything a test then does. Tests do not run in parallel.
func sharedPage(t *testing.T) *browser.Page {
	t.Helper()
	p := provider(t)
	if fixture.shared == nil {
		pg, err := p.Open(context.Background())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		fixture.shared = pg
	}
	return fixture.shared
}

// navigate loads url and fails the test on error.
func navigate(t *testing.T, pg *browser.Page, url string) {
	t.Helper()
	if err := pg.Navigate(context.Background(), url); err != nil {
		t.Fatalf("Navigate(%s): %v", url, err)
	}
}

func wantCode(t *testing.T, err error, code protocol.Code, parts ...string) {
	t.Helper()
	var ce *handle.CapabilityError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want a *handle.CapabilityError with code %s", err, err, code)
	}
	if ce.Code != code {
		t.Fatalf("code = %s, want %s (error: %v)", ce.Code, code, err)
	}
	if ce.Handle != handle.KindPage {
		t.Errorf("handle = %s, want page", ce.Handle)
	}
	for _, p := range parts {
		if !strings.Contains(ce.Message, p) {
			t.Errorf("message %q does not contain %q", ce.Message, p)
		}
	}
}

func TestNavigateAndText(t *testing.T) {
	pg := sharedPage(t)
	navigate(t, pg, siteURL("/hello"))
	tests := []struct {
		selector string
		want     string
		code     protocol.Code
	}{
		{"", "Hello\n\npara text", ""},
		{"h1", "Hello", ""},
		{"#p", "para text", ""},
		{"#missing", "", protocol.CodeNotFound},
		{"[[", "", protocol.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.selector, func(t *testing.T) {
			got, err := pg.Text(context.Background(), tt.selector)
			if tt.code != "" {
				wantCode(t, err, tt.code)
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Text(%q) = %q, %v; want %q", tt.selector, got, err, tt.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	pg := sharedPage(t)
	navigate(t, pg, siteURL("/hello"))
	tests := []struct {
		expr string
		want string
		code protocol.Code
	}{
		{"1 + 2", "3", ""},
		{"document.title", `"Greeting"`, ""},
		{"({a: [1, 'x'], b: null})", `{"a":[1,"x"],"b":null}`, ""},
		{"Promise.resolve(42)", "42", ""},
		{"undefined", "null", ""},
		{"(() => { throw new Error('boom') })()", "", protocol.CodeInvalidArgument},
		{"this is not javascript", "", protocol.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := pg.Evaluate(context.Background(), tt.expr)
			if tt.code != "" {
				wantCode(t, err, tt.code)
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Evaluate(%q) = %s, %v; want %s", tt.expr, got, err, tt.want)
			}
		})
	}
	t.Run("exception message reaches the model", func(t *testing.T) {
		_, err := pg.Evaluate(context.Background(), "(() => { throw new Error('boom') })()")
		wantCode(t, err, protocol.CodeInvalidArgument, "boom")
	})
}

func TestScreenshotIsPNG(t *testing.T) {
	pg := sharedPage(t)
	navigate(t, pg, siteURL("/hello"))
	png, err := pg.Screenshot(context.Background())
	if err != nil {
		t.Fatalf("Screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot starts with %q, want the PNG signature", png[:min(8, len(png))])
	}
}

func TestNavigateDenied(t *testing.T) {
	pg := sharedPage(t)
	before := fixture.internal.hits.Load()
	tests := []struct {
		name  string
		url   string
		parts []string
	}{
		{"host not in allow_hosts", "http://evil.test:" + strconv.Itoa(fixture.site.port) + "/", []string{"evil.test", "allow_hosts"}},
		{"port not in ports", "http://api.test:1/", []string{"ports"}},
		{"ftp not in schemes", "ftp://api.test/", []string{"schemes"}},
		{"https port not in ports", "https://api.test/", []string{"ports"}},
		{"file", "file:///etc/passwd", []string{"schemes"}},
		{"data", "data:text/html,<h1>hi</h1>", []string{"schemes"}},
		{"javascript", "javascript:alert(1)", []string{"schemes"}},
		{"chrome", "chrome://version", []string{"schemes"}},
		{"about", "about:blank", []string{"schemes"}},
		{"numeric host", "http://2130706434:" + strconv.Itoa(fixture.internal.port) + "/", []string{"numeric"}},
		// Allowed by name; refused by the proxy's dialer.
		{"name resolving to a denied address", internalURL("internal.test", "/"), []string{`"internal.test"`, "loopback", "allow_cidrs"}},
		{"denied address literal", internalURL("127.0.0.2", "/"), []string{"127.0.0.2", "allow_cidrs"}},
		{"redirect to a denied address", siteURL("/redirect"), []string{`"internal.test"`, "allow_cidrs"}},
		// https goes through a CONNECT tunnel, which the proxy refuses.
		{"https tunnel to a denied address", "https://internal.test:" + strconv.Itoa(fixture.internal.port) + "/", []string{`"internal.test"`, "allow_cidrs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pg.Navigate(context.Background(), tt.url)
			wantCode(t, err, protocol.CodeDenied, tt.parts...)
		})
	}
	if n := fixture.internal.hits.Load() - before; n != 0 {
		t.Errorf("the denied address got %d requests, want 0", n)
	}
}

func TestNavigateInvalidURL(t *testing.T) {
	pg := sharedPage(t)
	for _, u := range []string{"/relative", "api.test/hello", ""} {
		t.Run(u, func(t *testing.T) {
			wantCode(t, pg.Navigate(context.Background(), u), protocol.CodeInvalidArgument)
		})
	}
}

func TestForgedProxyHeadersIgnored(t *testing.T) {
	pg := sharedPage(t)
	navigate(t, pg, siteURL("/forged"))
	got, err := pg.Text(context.Background(), "")
	if err != nil || got != "forged" {
		t.Fatalf("Text = %q, %v; want the page's own text", got, err)
	}
}

func TestSubresourceToDeniedAddress(t *testing.T) {
	pg := openPage(t)
	siteBefore := fixture.site.hits.Load()
	before := fixture.internal.hits.Load()
	navigate(t, pg, siteURL("/subresources"))
	// A script's own requests, awaited so that they are over before we
	// count: by name, by address, and through a redirect.
	got, err := pg.Evaluate(context.Background(), fmt.Sprintf(`Promise.all([%q, %q, %q].map(u =>
		fetch(u, {mode: "no-cors"}).then(r => "answered", e => "failed")))`,
		internalURL("internal.test", "/fetch"), internalURL("127.0.0.2", "/fetch"), siteURL("/redirect")))
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	t.Logf("script fetches: %s", got)
	if n := fixture.internal.hits.Load() - before; n != 0 {
		t.Errorf("the denied address got %d requests, want 0", n)
	}
	// The page and its allowed image did load through the same proxy.
	if n := fixture.site.hits.Load() - siteBefore; n < 2 {
		t.Errorf("the allowed site got %d requests, want at least 2 (page and image)", n)
	}
	loaded, err := pg.Evaluate(context.Background(), `document.getElementById("ok").naturalWidth`)
	if err != nil || string(loaded) != "1" {
		t.Errorf("allowed image width = %s, %v; want 1", loaded, err)
	}
}

func TestPagesAreIsolated(t *testing.T) {
	first := openPage(t)
	navigate(t, first, siteURL("/set-cookie"))
	if c, err := first.Evaluate(context.Background(), "document.cookie"); err != nil || string(c) != `"session=s3cret"` {
		t.Fatalf("first tab cookie = %s, %v", c, err)
	}
	second := openPage(t)
	navigate(t, second, siteURL("/hello"))
	if c, err := second.Evaluate(context.Background(), "document.cookie"); err != nil || string(c) != `""` {
		t.Fatalf("second tab sees cookie %s, %v; want none", c, err)
	}
}

func TestNavigateTimeoutAndCancel(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		pg := openPage(t)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		wantCode(t, pg.Navigate(ctx, siteURL("/block")), protocol.CodeTimeout)
	})
	t.Run("cancel", func(t *testing.T) {
		pg := sharedPage(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantCode(t, pg.Navigate(ctx, siteURL("/hello")), protocol.CodeCancelled)
	})
}

func TestMissingChromium(t *testing.T) {
	dir := t.TempDir()
	notExec := dir + "/chromium"
	if err := os.WriteFile(notExec, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		binary string
		part   string
	}{
		{"no such file", "/nonexistent/chromium", "not installed"},
		{"a directory", dir, "not an executable"},
		{"not executable", notExec, "not an executable"},
		{"exits at once", "/bin/true", "did not start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := browser.New(context.Background(), browser.Grants{
				Grants: fetch.Grants{AllowHosts: []string{"example.com"}},
				Binary: tt.binary,
			}, nil)
			if err == nil {
				p.Close()
				t.Fatal("New succeeded")
			}
			wantCode(t, err, protocol.CodeUnavailable, tt.part)
		})
	}
}

func TestCloseStopsPages(t *testing.T) {
	provider(t) // skips without Chromium
	p, err := browser.New(context.Background(), browser.Grants{Grants: fetch.Grants{AllowHosts: []string{"example.com"}}}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ns := browser.NetNS(p)
	if ns == "" {
		t.Fatal("Chromium has no network namespace of its own")
	}
	pg, err := p.Open(context.Background())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := p.Close(); err != nil { // with pg still open
		t.Fatalf("Close: %v", err)
	}
	if left := processesIn(ns); len(left) > 0 {
		t.Errorf("Close left Chromium processes running: %v", left)
	}
	_, err = pg.Evaluate(context.Background(), "1")
	wantCode(t, err, protocol.CodeUnavailable)
	pg.Close()
	_, err = p.Open(context.Background())
	wantCode(t, err, protocol.CodeUnavailable)
	p.Close()
}

func TestGrantsValidate(t *testing.T) {
	tests := []struct {
		name  string
		g     browser.Grants
		field string
	}{
		{"ok", browser.Grants{Grants: fetch.Grants{AllowHosts: []string{"example.com"}}}, ""},
		{"net field", browser.Grants{Grants: fetch.Grants{AllowHosts: []string{"*.com"}}}, "allow_hosts[0]"},
		{"screenshot size", browser.Grants{Grants: fetch.Grants{AllowHosts: []string{"example.com"}}, MaxScreenshotBytes: -1}, "max_screenshot_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.g.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.field+":") {
				t.Fatalf("Validate = %v, want an error for %s", err, tt.field)
			}
		})
	}
}

// TestTextTooLarge: a text over max_response_bytes is too_large, measured
// in the page and never sent: 20 MiB of it ended in a timeout before, the
// time taken to send and decode it. An element whose text content is over
// the limit is refused before innerText lays anything out; a text of few
// UTF-16 units but more UTF-8 bytes than the limit is counted in bytes.
func TestTextTooLarge(t *testing.T) {
	pg := sharedPage(t)
	navigate(t, pg, siteURL("/hello"))
	// Hidden, so that Chromium does not lay out 20 MiB of text for its next
	// frame: that alone keeps the page busy past any timeout, and no check
	// of brain's can shorten it.
	fill := `(() => { const d = document.createElement("div"); d.style.display = "none"; d.textContent = 'lorem ipsum dolor '.repeat(Math.floor((20 << 20) / 18)); document.body.replaceChildren(d); return 0 })()`
	if _, err := pg.Evaluate(context.Background(), fill); err != nil {
		t.Fatal(err)
	}
	_, err := pg.Text(context.Background(), "")
	wantCode(t, err, protocol.CodeTooLarge, "text content has 20971512 characters", "max_response_bytes")

	// Bytes, not UTF-16 units: a provider whose limit is 1000 bytes, and
	// 800 units that are 2,000 bytes of UTF-8.
	small, err := browser.New(context.Background(), browser.Grants{Grants: fetch.Grants{AllowHosts: []string{"example.com"}, MaxResponseBytes: 1000}}, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer small.Close()
	spg, err := small.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer spg.Close()
	if _, err := spg.Evaluate(context.Background(), `document.body.textContent = '\u20ac\u20ac\u20ac '.repeat(200), 0`); err != nil {
		t.Fatal(err)
	}
	_, err = spg.Text(context.Background(), "")
	wantCode(t, err, protocol.CodeTooLarge, "the text has 1999 bytes, more than 1000")
}
