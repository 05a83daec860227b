package fetch_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fetch"
)

// Attacks: one test each. Every denied request's server listens on the
// address the attack aims at, so "no request arrived" is meaningful.

func TestDenyLoopbackLiteral(t *testing.T) {
	srv := newServer(t, "127.0.0.1:0", text("secret"))
	// The host is allowed by name; only the address rule stands in the way.
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"127.0.0.1"}, Schemes: []string{"http"}, Ports: []int{srv.port}})
	_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("127.0.0.1", srv.port, "/")})
	wantCode(t, err, protocol.CodeDenied, "127.0.0.1", "loopback", "allow_cidrs")
	wantNoHits(t, srv)
}

func TestDenyDecimalHost(t *testing.T) {
	srv := newServer(t, "127.0.0.1:0", text("secret"))
	f := newFetcher(t, loopbackGrants(srv.port))
	_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("2130706433", srv.port, "/")})
	wantCode(t, err, protocol.CodeDenied, "2130706433", "numeric", "allow_hosts")
	// The dialer refuses the form too, whatever a resolver would make of it.
	_, err = f.Policy().DialContext(context.Background(), "tcp", "2130706433:"+strconv.Itoa(srv.port))
	wantDenied(t, err, "allow_hosts")
	wantNoHits(t, srv)
}

func TestDenyHexHost(t *testing.T) {
	srv := newServer(t, "127.0.0.1:0", text("secret"))
	f := newFetcher(t, loopbackGrants(srv.port))
	_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("0x7f000001", srv.port, "/")})
	wantCode(t, err, protocol.CodeDenied, "0x7f000001", "numeric", "allow_hosts")
	_, err = f.Policy().DialContext(context.Background(), "tcp", "0x7f000001:"+strconv.Itoa(srv.port))
	wantDenied(t, err, "allow_hosts")
	wantNoHits(t, srv)
}

func TestDenyOtherNumericForms(t *testing.T) {
	srv := newServer(t, "127.0.0.1:0", text("secret"))
	f := newFetcher(t, loopbackGrants(srv.port))
	for _, host := range []string{"127.1", "127.0.1", "0177.0.0.1", "0x7f.0.0.1", "0x7F.1", "017700000001", "127.0.0.01", "api.test.0x1", "api.test.1"} {
		t.Run(host, func(t *testing.T) {
			_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf(host, srv.port, "/")})
			wantCode(t, err, protocol.CodeDenied, "numeric", "allow_hosts")
		})
	}
	wantNoHits(t, srv)
}

func TestDenyIPv6Loopback(t *testing.T) {
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"::1"}, Schemes: []string{"http"}, Ports: []int{8080}})
	_, err := f.Fetch(context.Background(), handle.Request{URL: "http://[::1]:8080/"})
	wantCode(t, err, protocol.CodeDenied, "::1", "loopback", "allow_cidrs")
}

func TestDenyIPv4MappedLoopback(t *testing.T) {
	srv := newServer(t, "127.0.0.1:0", text("secret"))
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"::ffff:127.0.0.1"}, Schemes: []string{"http"}, Ports: []int{srv.port}})
	_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("::ffff:127.0.0.1", srv.port, "/")})
	wantCode(t, err, protocol.CodeDenied, "127.0.0.1", "loopback", "allow_cidrs")
	wantNoHits(t, srv)
}

func TestDenyMetadataAddress(t *testing.T) {
	// Nothing is sent: the address is refused on the socket before
	// connect(2).
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"169.254.169.254"}, Schemes: []string{"http"}})
	_, err := f.Fetch(context.Background(), handle.Request{URL: "http://169.254.169.254/latest/meta-data/"})
	wantCode(t, err, protocol.CodeDenied, "169.254.169.254", "link-local", "allow_cidrs")
}

func TestDenyUnspecifiedAddress(t *testing.T) {
	// On Linux a connection to 0.0.0.0 reaches the local host, here srv.
	srv := newServer(t, "127.0.0.1:0", text("secret"))
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"0.0.0.0"}, Schemes: []string{"http"}, Ports: []int{srv.port}})
	_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("0.0.0.0", srv.port, "/")})
	wantCode(t, err, protocol.CodeDenied, "0.0.0.0", "unspecified", "allow_cidrs")
	wantNoHits(t, srv)
}

func TestDenyNameResolvingToLoopback(t *testing.T) {
	srv := newServer(t, "127.0.0.1:0", text("secret"))
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"loop.test"}, Schemes: []string{"http"}, Ports: []int{srv.port}})
	_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("loop.test", srv.port, "/")})
	wantCode(t, err, protocol.CodeDenied, `"loop.test"`, "loopback", "allow_cidrs")
	if msg := err.(*handle.CapabilityError).Message; strings.Contains(msg, "127.0.0.1") {
		t.Errorf("message %q names the address a host name resolved to", msg)
	}
	wantNoHits(t, srv)
}

func TestDenyRedirectToDeniedAddress(t *testing.T) {
	internal := newServer(t, "127.0.0.2:0", text("secret"))
	tests := []struct {
		name     string
		location string
		parts    []string
	}{
		// internal.test is an allowed host, but it resolves to 127.0.0.2,
		// which allow_cidrs does not contain.
		{"allowed host, denied address", urlOf("internal.test", internal.port, "/"), []string{`"internal.test"`, "loopback", "allow_cidrs"}},
		{"address literal not in allow_hosts", urlOf("127.0.0.2", internal.port, "/"), []string{"127.0.0.2", "allow_hosts"}},
		{"numeric form", urlOf("2130706434", internal.port, "/"), []string{"numeric", "allow_hosts"}},
		{"scheme", "ftp://internal.test/", []string{"ftp", "schemes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			front := newServer(t, "127.0.0.1:0", http.RedirectHandler(tt.location, http.StatusFound))
			g := loopbackGrants(front.port, internal.port)
			g.AllowHosts = append(g.AllowHosts, "internal.test")
			f := newFetcher(t, g)
			_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("api.test", front.port, "/")})
			wantCode(t, err, protocol.CodeDenied, tt.parts...)
			if n := front.hits.Load(); n != 1 {
				t.Errorf("the allowed server got %d requests, want 1", n)
			}
		})
	}
	wantNoHits(t, internal)
}

func TestDenyPort(t *testing.T) {
	tests := []struct {
		name string
		g    fetch.Grants
		url  string
	}{
		{"not in ports", loopbackGrants(8080), "http://api.test:22/"},
		{"default port of scheme omitted from ports", loopbackGrants(8080), "http://api.test/"},
		{"not the https default", fetch.Grants{AllowHosts: []string{"api.test"}}, "https://api.test:8443/"},
		{"not the http default", fetch.Grants{AllowHosts: []string{"api.test"}, Schemes: []string{"http"}}, "http://api.test:443/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFetcher(t, tt.g)
			_, err := f.Fetch(context.Background(), handle.Request{URL: tt.url})
			wantCode(t, err, protocol.CodeDenied, "port", "(ports)")
		})
	}
}

func TestDenyScheme(t *testing.T) {
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"api.test"}})
	for _, u := range []string{"http://api.test/", "ftp://api.test/", "file://localhost/etc/passwd", "gopher://api.test/", "ws://api.test/", "javascript://api.test/%0aalert(1)"} {
		t.Run(u, func(t *testing.T) {
			_, err := f.Fetch(context.Background(), handle.Request{URL: u})
			wantCode(t, err, protocol.CodeDenied, "scheme", "(schemes: https)")
		})
	}
}

func TestTooLarge(t *testing.T) {
	const max = 1024
	body := strings.Repeat("x", max+1)
	tests := []struct {
		name string
		h    http.HandlerFunc
		want protocol.Code
	}{
		{"content-length", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) }, protocol.CodeTooLarge},
		{"chunked", func(w http.ResponseWriter, r *http.Request) {
			for i := range len(body) {
				_, _ = io.WriteString(w, body[i:i+1])
				if i%256 == 0 {
					w.(http.Flusher).Flush()
				}
			}
		}, protocol.CodeTooLarge},
		{"exactly the cap", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body[:max]) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, "127.0.0.1:0", tt.h)
			g := loopbackGrants(srv.port)
			g.MaxResponseBytes = max
			f := newFetcher(t, g)
			resp, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("api.test", srv.port, "/")})
			if tt.want == "" {
				if err != nil || len(resp.Body) != max {
					t.Fatalf("Fetch = %d bytes, %v; want %d bytes", len(resp.Body), err, max)
				}
				return
			}
			wantCode(t, err, tt.want, "max_response_bytes")
		})
	}
}

// blockingServer answers nothing until the test ends; it returns a channel
// closed when the first request arrives.
func blockingServer(t *testing.T) (*server, <-chan struct{}) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
	}))
	// Cleanups run last-in first-out: release the handler, then srv.Close
	// (registered by newServer) can wait for it.
	t.Cleanup(func() { close(release) })
	return srv, arrived
}

func TestTimeout(t *testing.T) {
	srv, _ := blockingServer(t)
	t.Run("grant timeout", func(t *testing.T) {
		g := loopbackGrants(srv.port)
		g.Timeout = 100 * time.Millisecond
		f := newFetcher(t, g)
		_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("api.test", srv.port, "/")})
		wantCode(t, err, protocol.CodeTimeout, "timeout")
	})
	t.Run("caller deadline", func(t *testing.T) {
		f := newFetcher(t, loopbackGrants(srv.port))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := f.Fetch(ctx, handle.Request{URL: urlOf("api.test", srv.port, "/")})
		wantCode(t, err, protocol.CodeTimeout)
	})
}

func TestCancelled(t *testing.T) {
	srv, arrived := blockingServer(t)
	f := newFetcher(t, loopbackGrants(srv.port))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := f.Fetch(ctx, handle.Request{URL: urlOf("api.test", srv.port, "/")})
	wantCode(t, err, protocol.CodeCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
}

func TestProxyEnvIgnored(t *testing.T) {
	proxy := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "proxied", http.StatusBadGateway)
	}))
	target := newServer(t, "127.0.0.1:0", text("direct"))
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	u := urlOf("api.test", target.port, "/")
	// The environment does name the proxy for this URL: a client that
	// honoured it would have used it.
	pu, _ := url.Parse(u)
	if p, err := httpproxy.FromEnvironment().ProxyFunc()(pu); err != nil || p == nil || p.String() != proxy.URL {
		t.Fatalf("environment proxy for %s = %v, %v; want %s", u, p, err, proxy.URL)
	}

	f := newFetcher(t, loopbackGrants(target.port))
	resp, err := f.Fetch(context.Background(), handle.Request{URL: u})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if string(resp.Body) != "direct" {
		t.Errorf("body = %q, want %q", resp.Body, "direct")
	}
	if n := proxy.hits.Load(); n != 0 {
		t.Errorf("the proxy got %d requests, want 0", n)
	}
}

// Allowed requests.

func TestFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /hello", text("hello"))
	mux.Handle("GET /moved", http.RedirectHandler("/hello", http.StatusFound))
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", r.Header.Get("X-Send"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	})
	srv := newServer(t, "127.0.0.1:0", mux)
	f := newFetcher(t, loopbackGrants(srv.port))

	tests := []struct {
		name       string
		req        handle.Request
		wantStatus int
		wantBody   string
		wantURL    string
		wantHeader [2]string
	}{
		{"get", handle.Request{URL: urlOf("api.test", srv.port, "/hello")}, 200, "hello", urlOf("api.test", srv.port, "/hello"), [2]string{"Content-Type", "text/plain"}},
		{"name in upper case with a trailing dot", handle.Request{URL: urlOf("API.test.", srv.port, "/hello")}, 200, "hello", "", [2]string{}},
		{"redirect on an allowed host", handle.Request{URL: urlOf("api.test", srv.port, "/moved")}, 200, "hello", urlOf("api.test", srv.port, "/hello"), [2]string{}},
		{"post with body and header", handle.Request{Method: "POST", URL: urlOf("api.test", srv.port, "/echo"), Header: map[string][]string{"X-Send": {"v"}}, Body: []byte("data")}, 201, "data", "", [2]string{"X-Got", "v"}},
		{"404 is not an error", handle.Request{URL: urlOf("api.test", srv.port, "/nope")}, 404, "404 page not found\n", "", [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := f.Fetch(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if resp.Status != tt.wantStatus || string(resp.Body) != tt.wantBody {
				t.Errorf("Fetch = %d %q, want %d %q", resp.Status, resp.Body, tt.wantStatus, tt.wantBody)
			}
			if tt.wantURL != "" && resp.URL != tt.wantURL {
				t.Errorf("URL = %q, want %q", resp.URL, tt.wantURL)
			}
			if k := tt.wantHeader[0]; k != "" && http.Header(resp.Header).Get(k) != tt.wantHeader[1] {
				t.Errorf("header %s = %q, want %q", k, http.Header(resp.Header).Get(k), tt.wantHeader[1])
			}
		})
	}
}

func TestMaxRedirects(t *testing.T) {
	// /r/N redirects to /r/N-1; /r/0 answers.
	srv := newServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		if n == 0 {
			_, _ = io.WriteString(w, "done")
			return
		}
		http.Redirect(w, r, "/r/"+strconv.Itoa(n-1), http.StatusFound)
	}))
	tests := []struct {
		name       string
		max, hops  int
		want       protocol.Code
		wantStatus int
	}{
		{"default allows 5", 0, 5, "", 200},
		{"default refuses 6", 0, 6, protocol.CodeDenied, 0},
		{"1 allows 1", 1, 1, "", 200},
		{"1 refuses 2", 1, 2, protocol.CodeDenied, 0},
		{"-1 returns the redirect", -1, 1, "", http.StatusFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := loopbackGrants(srv.port)
			g.MaxRedirects = tt.max
			f := newFetcher(t, g)
			resp, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("api.test", srv.port, "/r/"+strconv.Itoa(tt.hops))})
			if tt.want != "" {
				wantCode(t, err, tt.want, "max_redirects")
				return
			}
			if err != nil || resp.Status != tt.wantStatus {
				t.Fatalf("Fetch = %d, %v; want %d", resp.Status, err, tt.wantStatus)
			}
		})
	}
}

func TestFetchInvalidArgument(t *testing.T) {
	f := newFetcher(t, loopbackGrants(8080))
	tests := []struct {
		name string
		req  handle.Request
	}{
		{"relative URL", handle.Request{URL: "/path"}},
		{"no host", handle.Request{URL: "http:///path"}},
		// file:///etc/passwd, which has no host, is denied for its scheme:
		// TestSchemeWithoutHost.
		{"unparsable URL", handle.Request{URL: "http://api.test:8080/%zz"}},
		{"bad method", handle.Request{Method: "GE T", URL: "http://api.test:8080/"}},
		{"bad header name", handle.Request{URL: "http://api.test:8080/", Header: map[string][]string{"X Y": {"v"}}}},
		{"header value with a newline", handle.Request{URL: "http://api.test:8080/", Header: map[string][]string{"X-Y": {"a\r\nHost: evil"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Fetch(context.Background(), tt.req)
			wantCode(t, err, protocol.CodeInvalidArgument)
		})
	}
}

func TestFetchConnectionErrors(t *testing.T) {
	// A port on which nothing listens: bind one, note it, close it.
	closed := newServer(t, "127.0.0.1:0", text(""))
	closed.Close()
	g := loopbackGrants(closed.port)
	g.AllowHosts = append(g.AllowHosts, "gone.test")
	f := newFetcher(t, g)
	t.Run("name does not resolve", func(t *testing.T) {
		_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("gone.test", closed.port, "/")})
		wantCode(t, err, protocol.CodeNotFound, "gone.test")
	})
	t.Run("connection refused", func(t *testing.T) {
		_, err := f.Fetch(context.Background(), handle.Request{URL: urlOf("api.test", closed.port, "/")})
		wantCode(t, err, protocol.CodeUnavailable, "refused")
	})
	t.Run("context already done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := f.Fetch(ctx, handle.Request{URL: urlOf("api.test", closed.port, "/")})
		wantCode(t, err, protocol.CodeCancelled)
	})
}

func TestNewRejectsInvalidGrants(t *testing.T) {
	_, err := fetch.New(fetch.Grants{AllowHosts: []string{"*"}}, nil)
	if err == nil {
		t.Fatal("New accepted allow_hosts [*]")
	}
}

// TestSchemeWithoutHost: a URL whose scheme the grant does not allow is
// refused for its scheme, naming the allowed ones, also when it has no
// host (file:///etc/passwd), where it was "not absolute: give a scheme
// and a host".
func TestSchemeWithoutHost(t *testing.T) {
	f := newFetcher(t, fetch.Grants{AllowHosts: []string{"example.com"}})
	for _, u := range []string{"file:///etc/passwd", "file://host/etc/passwd", "gopher:x"} {
		_, err := f.Fetch(context.Background(), handle.Request{URL: u})
		wantCode(t, err, protocol.CodeDenied, `is not allowed (schemes: https)`)
	}
	_, err := f.Fetch(context.Background(), handle.Request{URL: "/relative"})
	wantCode(t, err, protocol.CodeInvalidArgument, "is not absolute")
}
