package fetch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fetch"
)

// mapResolver resolves the names it holds and nothing else.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// testResolver maps the tests' names: api.test and loop.test to the
// allowed loopback address, internal.test to a loopback address that the
// positive grants do not allow.
var testResolver = mapResolver{
	"api.test":      {netip.MustParseAddr("127.0.0.1")},
	"loop.test":     {netip.MustParseAddr("127.0.0.1")},
	"internal.test": {netip.MustParseAddr("127.0.0.2")},
}

// server is a test server on a loopback address that counts requests.
type server struct {
	*httptest.Server
	port int
	hits atomic.Int64
}

// newServer starts h on addr ("127.0.0.1:0", "127.0.0.2:0") and closes it
// when the test ends.
func newServer(t testing.TB, addr string, h http.Handler) *server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	s.port = ln.Addr().(*net.TCPAddr).Port
	return s
}

// text answers every request with body.
func text(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(body))
	})
}

// loopbackGrants allow http://api.test:<ports> and the address 127.0.0.1.
func loopbackGrants(ports ...int) fetch.Grants {
	return fetch.Grants{
		AllowHosts: []string{"api.test"},
		Schemes:    []string{"http"},
		Ports:      ports,
		AllowCIDRs: []string{"127.0.0.1/32"},
	}
}

// newFetcher returns a Fetcher with the test resolver, which can connect
// to loopback addresses only (see fetch.SafetyNet).
func newFetcher(t testing.TB, g fetch.Grants) *fetch.Fetcher {
	t.Helper()
	f, err := fetch.New(g, &fetch.Options{Resolver: testResolver})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	fetch.SafetyNet(f.Policy(), func(addr string) {
		t.Errorf("the policy allowed a connection to %s; the safety net refused it", addr)
	})
	return f
}

// url returns http://host:port/path.
func urlOf(host string, port int, path string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
}

// wantCode fails unless err is a net *CapabilityError with code and a
// message containing every one of parts.
func wantCode(t *testing.T, err error, code protocol.Code, parts ...string) {
	t.Helper()
	var ce *handle.CapabilityError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want a *handle.CapabilityError with code %s", err, err, code)
	}
	if ce.Code != code {
		t.Fatalf("code = %s, want %s (error: %v)", ce.Code, code, err)
	}
	if ce.Handle != handle.KindNet || ce.Op != "fetch" {
		t.Errorf("handle, op = %s, %s; want net, fetch", ce.Handle, ce.Op)
	}
	for _, p := range parts {
		if !strings.Contains(ce.Message, p) {
			t.Errorf("message %q does not contain %q", ce.Message, p)
		}
	}
}

// wantNoHits fails if s received a request.
func wantNoHits(t *testing.T, s *server) {
	t.Helper()
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server for the denied address got %d requests, want 0", n)
	}
}

// wantDenied fails unless err's chain holds a *fetch.DeniedError for rule.
func wantDenied(t *testing.T, err error, rule string) {
	t.Helper()
	var de *fetch.DeniedError
	if !errors.As(err, &de) {
		t.Fatalf("error = %v (%T), want a *fetch.DeniedError", err, err)
	}
	if de.Rule != rule {
		t.Errorf("rule = %q, want %q (error: %v)", de.Rule, rule, err)
	}
}
