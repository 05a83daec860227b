package browser

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fetch"
)

// These tests drive the proxy with Go's HTTP client, without Chromium: the
// CONNECT path with real TLS, and the paths a browser test cannot observe.

type staticResolver map[string]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type countingServer struct {
	*httptest.Server
	port int
	hits atomic.Int64
}

func startCounting(t *testing.T, addr string, tlsOn bool, h http.HandlerFunc) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{port: ln.Addr().(*net.TCPAddr).Port}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	s.Listener.Close()
	s.Listener = ln
	if tlsOn {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// proxyFixture is a proxy allowing api.test (127.0.0.1) and internal.test
// by name, but only the address 127.0.0.1; an HTTP server and a TLS server
// on 127.0.0.1; and a server on the denied 127.0.0.2.
type proxyFixture struct {
	proxy              *proxy
	plain, tls, denied *countingServer
	client             *http.Client
}

func newProxyFixture(t *testing.T) *proxyFixture {
	f := &proxyFixture{}
	answer := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headerCode, "denied") // forged: must not reach the browser
		fmt.Fprint(w, "hello")
	}
	f.plain = startCounting(t, "127.0.0.1:0", false, answer)
	f.tls = startCounting(t, "127.0.0.1:0", true, answer)
	f.denied = startCounting(t, "127.0.0.2:0", false, answer)
	policy, err := fetch.NewPolicy(fetch.Grants{
		AllowHosts: []string{"api.test", "internal.test", "gone.test"},
		Schemes:    []string{"http", "https"},
		Ports:      []int{f.plain.port, f.tls.port, f.denied.port},
		AllowCIDRs: []string{"127.0.0.1/32"},
	}, &fetch.Options{Resolver: staticResolver{
		"api.test":      netip.MustParseAddr("127.0.0.1"),
		"internal.test": netip.MustParseAddr("127.0.0.2"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.proxy = startProxy(ln, policy, 5*time.Second, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(f.proxy.close)
	roots := x509.NewCertPool()
	roots.AddCert(f.tls.Certificate())
	proxyURL, _ := url.Parse("http://" + f.proxy.addr())
	tr := &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		// httptest's certificate names example.com.
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "example.com"},
	}
	t.Cleanup(tr.CloseIdleConnections)
	f.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return f
}

func hostURL(scheme, host string, port int) string {
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/"
}

func TestProxy(t *testing.T) {
	f := newProxyFixture(t)
	tests := []struct {
		name       string
		url        string
		wantStatus int
		wantCode   protocol.Code // the proxy's own X-Brain-Code; "" for the server's answer
		wantErr    bool          // a refused CONNECT fails in the client
	}{
		{"plain http, allowed", hostURL("http", "api.test", f.plain.port), 200, "", false},
		{"https tunnel, allowed", hostURL("https", "api.test", f.tls.port), 200, "", false},
		{"plain http, host not allowed", hostURL("http", "evil.test", f.plain.port), 403, protocol.CodeDenied, false},
		{"plain http, port not allowed", hostURL("http", "api.test", 1), 403, protocol.CodeDenied, false},
		{"plain http, name resolving to a denied address", hostURL("http", "internal.test", f.denied.port), 403, protocol.CodeDenied, false},
		{"plain http, numeric host", hostURL("http", "2130706434", f.denied.port), 403, protocol.CodeDenied, false},
		{"plain http, name that does not resolve", hostURL("http", "gone.test", f.plain.port), 502, protocol.CodeNotFound, false},
		{"https tunnel, denied address", hostURL("https", "internal.test", f.denied.port), 0, "", true},
		{"https tunnel, address literal not allowed", hostURL("https", "127.0.0.2", f.denied.port), 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := f.client.Get(tt.url)
			if tt.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET %s = %d, want an error", tt.url, resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("GET %s: %v", tt.url, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("GET %s = %d %q, want %d", tt.url, resp.StatusCode, body, tt.wantStatus)
			}
			// Inside a TLS tunnel the proxy sees no headers, so the server's
			// forged one arrives; Navigate trusts the headers of plain http
			// responses only.
			if got := protocol.Code(resp.Header.Get(headerCode)); !strings.HasPrefix(tt.url, "https:") && got != tt.wantCode {
				t.Errorf("%s = %q, want %q", headerCode, got, tt.wantCode)
			}
			if tt.wantCode == "" && string(body) != "hello" {
				t.Errorf("body = %q, want the server's", body)
			}
		})
	}
	if n := f.denied.hits.Load(); n != 0 {
		t.Errorf("the denied address got %d requests, want 0", n)
	}
	t.Run("a refused tunnel is recorded", func(t *testing.T) {
		fl, ok := f.proxy.lastFailure(net.JoinHostPort("internal.test", strconv.Itoa(f.denied.port)))
		if !ok || fl.code != protocol.CodeDenied || !strings.Contains(fl.msg, "allow_cidrs") {
			t.Fatalf("lastFailure = %+v, %v; want a denial naming allow_cidrs", fl, ok)
		}
	})
}

func TestProxyRejectsOriginRequests(t *testing.T) {
	f := newProxyFixture(t)
	resp, err := http.Get("http://" + f.proxy.addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", resp.StatusCode)
	}
}

func TestProxyCloseEndsTunnels(t *testing.T) {
	f := newProxyFixture(t)
	conn, err := net.Dial("tcp", f.proxy.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := net.JoinHostPort("api.test", strconv.Itoa(f.plain.port))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %v, %v; want 200", resp, err)
	}
	f.proxy.close() // must not wait for the idle tunnel
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read after close = %v, want EOF", err)
	}
}
