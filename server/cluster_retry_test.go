package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// heldElsewhere is a lease held by another node, at addr.
type heldElsewhere struct{ addr string }

func (h *heldElsewhere) Error() string                    { return "held by node b" }
func (h *heldElsewhere) LeaseHolder() (node, addr string) { return "b", h.addr }

// retryModelToken is TestForwardRetry's model token, for its MCP requests.
const retryModelToken = "model-token-retry-0123456789"

// TestForwardRetry: a request forwarded to a session's owner is sent
// again when the owner certainly did not serve it — the owner refused it
// unserved (503 with Brain-Not-Served: stopping), or could not be reached
// — to the owner of the moment or, once the lease is free, served here,
// body and all; a request the owner had and did not answer (its
// connection cut mid-request) is not sent again unless it is a GET, and
// its caller is told it may have been served.
func TestForwardRetry(t *testing.T) {
	tokens, err := server.NewTokens(server.Token{Token: operatorToken, Side: "operator", Name: "ada"},
		server.Token{Token: retryModelToken, Side: "model", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	// The owner, node b: what it does with the k-th request it gets.
	var (
		mu     sync.Mutex
		bodies []string
		serve  func(k int, body string, w http.ResponseWriter)
	)
	// cut ends the owner's connection without an answer: it died.
	cut := func(w http.ResponseWriter) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = c.Close()
		}
	}
	var cutEarly atomic.Int64 // the first this many requests are cut before their body is read
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cutEarly.Add(-1) >= 0 {
			cut(w)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		k, f := len(bodies), serve
		mu.Unlock()
		f(k, string(b), w)
	}))
	t.Cleanup(owner.Close)
	reset := func(f func(k int, body string, w http.ResponseWriter)) {
		mu.Lock()
		bodies, serve = nil, f
		mu.Unlock()
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}

	addr := atomic.Pointer[string]{} // the holder's address; nil: the lease is free
	setOwner := func(a string) { addr.Store(&a) }
	// The MCP requests' session exists, recorded under the model token's
	// tenant, as the cluster's other node made it: an MCP request other
	// than initialize creates nothing, so it is forwarded only to a
	// session that exists.
	st := &ownedStore{failStore: &failStore{events: map[string][]session.Event{}}, owned: map[string]string{"s8": "tenant:t"}}
	mgr := server.NewManager(server.ManagerOptions{Node: "a", Store: st,
		Lease: func(context.Context, string) (server.Lease, error) {
			if a := addr.Load(); a != nil {
				return nil, &heldElsewhere{addr: *a}
			}
			return &soleLease{lost: make(chan struct{})}, nil
		}})
	hs := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr}))
	t.Cleanup(hs.Close)
	do := func(method, path, body string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		token := operatorToken
		if strings.HasSuffix(path, "/mcp") { // the MCP endpoint admits model tokens only
			token = retryModelToken
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	raw, err := protocol.EncodeFrame(&protocol.Frame{ID: "f1", Msg: &protocol.CapabilityCancel{CallID: "c-1"}})
	if err != nil {
		t.Fatal(err)
	}
	frame := string(raw)

	t.Run("refused unserved, then answered", func(t *testing.T) {
		setOwner(owner.URL)
		reset(func(k int, body string, w http.ResponseWriter) {
			if k < 3 {
				w.Header().Set("Brain-Not-Served", "1")
				w.Header().Set("Retry-After", "1")
				http.Error(w, `{"code":"unavailable","message":"the node is stopping"}`, http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, "served: "+body)
		})
		code, body, _ := do("POST", "/v1/sessions/s1/frames", frame)
		if code != 200 || body != "served: "+frame {
			t.Fatalf("POST through node a: %d %s", code, body)
		}
		if b := got(); len(b) != 3 || b[0] != frame || b[2] != frame {
			t.Fatalf("the owner got %q, want the frame three times", b)
		}
	})

	t.Run("refused unserved, then the lease is free: served here", func(t *testing.T) {
		setOwner(owner.URL)
		reset(func(k int, body string, w http.ResponseWriter) {
			addr.Store(nil) // the owner released the lease as it stopped
			w.Header().Set("Brain-Not-Served", "1")
			http.Error(w, `{"code":"unavailable","message":"the node is stopping"}`, http.StatusServiceUnavailable)
		})
		code, body, _ := do("GET", "/v1/sessions/s2", "")
		// The session has no past: node a, now its lease holder, says so.
		if code != http.StatusNotFound || !strings.Contains(body, "no session s2") {
			t.Fatalf("GET through node a: %d %s", code, body)
		}
		if n := len(got()); n != 1 {
			t.Fatalf("the owner got %d requests, want 1", n)
		}
	})

	t.Run("the owner cannot be reached, then the lease is free", func(t *testing.T) {
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close() // its port refuses connections, as a stopped node's does
		setOwner(gone.URL)
		reset(nil)
		var tries atomic.Int64
		mgr2 := server.NewManager(server.ManagerOptions{Node: "a", Store: &failStore{events: map[string][]session.Event{}},
			Lease: func(context.Context, string) (server.Lease, error) {
				if tries.Add(1) < 4 {
					return nil, &heldElsewhere{addr: gone.URL}
				}
				return &soleLease{lost: make(chan struct{})}, nil
			}})
		hs2 := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr2}))
		defer hs2.Close()
		req, _ := http.NewRequest("POST", hs2.URL+"/v1/sessions/s3/frames", strings.NewReader(frame))
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Served here, once the lease was free: the session has no past.
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no session s3") || tries.Load() != 4 {
			t.Fatalf("POST through node a after %d lease attempts: %d %s", tries.Load(), resp.StatusCode, b)
		}
		t.Logf("served by node a after %d lease attempts: %d %s", tries.Load(), resp.StatusCode, strings.TrimSpace(string(b)))
	})

	t.Run("the session is moving (a holder without an address): sent again", func(t *testing.T) {
		var tries atomic.Int64
		mgr3 := server.NewManager(server.ManagerOptions{Node: "a", Store: &failStore{events: map[string][]session.Event{}},
			Lease: func(context.Context, string) (server.Lease, error) {
				if tries.Add(1) < 3 {
					return nil, &heldElsewhere{} // no address: between owners
				}
				return &soleLease{lost: make(chan struct{})}, nil
			}})
		hs3 := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr3}))
		defer hs3.Close()
		req, _ := http.NewRequest("POST", hs3.URL+"/v1/sessions/s7/frames", strings.NewReader(frame))
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no session s7") || tries.Load() != 3 {
			t.Fatalf("POST through node a after %d lease attempts: %d %s", tries.Load(), resp.StatusCode, b)
		}
	})

	t.Run("a request the owner could not be sent whole is sent again", func(t *testing.T) {
		setOwner(owner.URL)
		reset(func(k int, body string, w http.ResponseWriter) { _, _ = io.WriteString(w, fmt.Sprint(len(body))) })
		cutEarly.Store(1) // the owner closes the connection before reading the body: a broken pipe
		defer cutEarly.Store(0)
		big := strings.Repeat("x", 8<<20)
		code, body, _ := do("POST", "/v1/sessions/s8/mcp", big)
		if code != 200 || body != fmt.Sprint(len(big)) {
			t.Fatalf("POST through node a: %d %.200s", code, body)
		}
		if b := got(); len(b) != 1 || len(b[0]) != len(big) {
			t.Fatalf("the owner got %d whole requests, want 1", len(b))
		}
	})

	t.Run("the owner died with the request: not sent again", func(t *testing.T) {
		setOwner(owner.URL)
		reset(func(k int, body string, w http.ResponseWriter) { cut(w) })
		code, body, hdr := do("POST", "/v1/sessions/s4/frames", frame)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "may have been served") || hdr.Get("Brain-Not-Served") != "" {
			t.Fatalf("POST through node a, the owner cut it: %d %s %v", code, body, hdr)
		}
		if n := len(got()); n != 1 {
			t.Fatalf("the owner got the POST %d times, want once", n)
		}
	})

	t.Run("a POST a stopping owner dropped is sent again once it released the lease", func(t *testing.T) {
		setOwner(owner.URL)
		reset(func(k int, body string, w http.ResponseWriter) {
			addr.Store(nil) // it stops: its listener closes on the request, then it releases the lease
			cut(w)
		})
		var asked atomic.Int64
		mgr4 := server.NewManager(server.ManagerOptions{Node: "a", Store: &failStore{events: map[string][]session.Event{}},
			Lease: func(context.Context, string) (server.Lease, error) {
				if a := addr.Load(); a != nil {
					return nil, &heldElsewhere{addr: *a}
				}
				return &soleLease{lost: make(chan struct{})}, nil
			},
			Holder: func(context.Context, string) (string, bool, error) {
				asked.Add(1)
				return "b", addr.Load() != nil, nil
			}})
		hs4 := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr4}))
		defer hs4.Close()
		req, _ := http.NewRequest("POST", hs4.URL+"/v1/sessions/s9/frames", strings.NewReader(frame))
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Served here, once the lease was free: the session has no past.
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no session s9") || len(got()) != 1 || asked.Load() == 0 {
			t.Fatalf("POST through node a: %d %s; the owner got %d, the holder was asked %d times", resp.StatusCode, b, len(got()), asked.Load())
		}
	})

	t.Run("a GET the owner died with is sent again", func(t *testing.T) {
		setOwner(owner.URL)
		reset(func(k int, body string, w http.ResponseWriter) {
			if k == 1 {
				cut(w)
				return
			}
			_, _ = io.WriteString(w, "read")
		})
		if code, body, _ := do("GET", "/v1/sessions/s5", ""); code != 200 || body != "read" {
			t.Fatalf("GET through node a: %d %s", code, body)
		}
		if n := len(got()); n != 2 {
			t.Fatalf("the owner got the GET %d times, want twice", n)
		}
	})

	t.Run("forwarded here already: refused unserved", func(t *testing.T) {
		setOwner(owner.URL)
		reset(nil)
		req, _ := http.NewRequest("GET", hs.URL+"/v1/sessions/s6", nil)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		req.Header.Set("Brain-Forwarded-By", "c")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Brain-Not-Served") == "" || len(got()) != 0 {
			t.Fatalf("a forwarded request for a session held elsewhere: %d %v, the owner got %d", resp.StatusCode, resp.Header, len(got()))
		}
	})
}

// ownedStore is a failStore that records sessions' owners (as the
// embedded store does for a cluster's nodes), starting with owned.
type ownedStore struct {
	*failStore
	mu    sync.Mutex
	owned map[string]string // session id → owner key
}

func (s *ownedStore) SetSessionOwner(_ context.Context, id, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owned[id] = owner
	return nil
}

func (s *ownedStore) SessionOwner(_ context.Context, id string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.owned[id]
	return o, ok, nil
}

func (s *ownedStore) SessionsOwned(_ context.Context, owner string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, o := range s.owned {
		if o == owner {
			n++
		}
	}
	return n, nil
}
