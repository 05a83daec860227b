package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// storeDown is a store's error saying what is wrong with it, as package
// store's *UnavailableError does.
type storeDown struct{ msg string }

func (e *storeDown) Error() string            { return "store: append an event: " + e.msg }
func (e *storeDown) StoreUnavailable() string { return e.msg }

const noQuorum = "the session store has no quorum: 1 of 3 NATS servers reachable"

// faultStore is failStore whose failures are chosen: fail, when set, is
// what every append returns.
type faultStore struct {
	failStore
	fail atomic.Pointer[error]
}

type faultJournal struct {
	st *faultStore
	j  session.Journal
}

func (j faultJournal) Append(e session.Event) error {
	if err := j.st.fail.Load(); err != nil {
		return *err
	}
	return j.j.Append(e)
}

func (st *faultStore) Journal(id string) (session.Journal, error) {
	j, _ := st.failStore.Journal(id)
	return faultJournal{st, j}, nil
}

func (st *faultStore) failWith(err error) {
	if err == nil {
		st.fail.Store(nil)
		return
	}
	st.fail.Store(&err)
}

// faultLease is soleLease that can be lost with an error.
type faultLease struct {
	soleLease
	mu  sync.Mutex
	err error
}

func (l *faultLease) lose(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	_ = l.Release(context.Background())
}

func (l *faultLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// closedWith reads c until its connection ends and returns the close
// status and reason, failing if it ended without a close frame (1006).
func closedWith(t *testing.T, c *clusterPeer) (websocket.StatusCode, string) {
	t.Helper()
	for {
		_, err := c.next()
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("the connection ended without a close frame (a bare 1006): %v", err)
		}
		return ce.Code, ce.Reason
	}
}

// TestStoreFaultsTold: a node that cannot use its store says so
// precisely. A session whose journal fails because of the store, or
// whose lease lapsed because of it, closes its WebSockets with 1013 and
// the store's sentence; one that moves for another reason with 1012; a
// request the store cannot serve is 503 unavailable with the sentence and
// Retry-After; /readyz says the same, and that the node is stopping.
func TestStoreFaultsTold(t *testing.T) {
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	st := &faultStore{failStore: failStore{events: map[string][]session.Event{}}}
	var leaseErr atomic.Pointer[error]
	var mu sync.Mutex
	held := map[string]*faultLease{}
	mgr := server.NewManager(server.ManagerOptions{Store: st, Node: "n1",
		Lease: func(_ context.Context, id string) (server.Lease, error) {
			if err := leaseErr.Load(); err != nil {
				return nil, *err
			}
			l := &faultLease{soleLease: soleLease{lost: make(chan struct{})}}
			mu.Lock()
			held[id] = l
			mu.Unlock()
			return l, nil
		}})
	var ready atomic.Pointer[error]
	srv := server.New(server.Options{Tokens: tokens, Manager: mgr, Ready: func() error {
		if err := ready.Load(); err != nil {
			return *err
		}
		return nil
	}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	n := &node{id: "n1", url: hs.URL}

	// connected opens session sid with one capability registered.
	connected := func(t *testing.T, sid string) *clusterPeer {
		t.Helper()
		c := dialNode(t, n, sid, "", 5*time.Second)
		c.until(ofType(protocol.TypeSnapshot))
		c.send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.echo", false)}})
		c.until(func(f *protocol.Frame) bool { return f.Ref == "r1" })
		return c
	}
	// event makes session sid emit an event (a registration by the runtime).
	event := func(t *testing.T, sid string) {
		t.Helper()
		s, release, err := mgr.Lookup(context.Background(), sid)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		_ = s.RegisterAgent(protocol.Capability{Name: "env.x", Description: "x", InputSchema: json.RawMessage(`{"type":"object"}`),
			Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
			return nil, nil
		}))
	}

	t.Run("a journal the store fails closes with 1013 and the store's sentence", func(t *testing.T) {
		c := connected(t, "j-store")
		st.failWith(&storeDown{noQuorum})
		defer st.failWith(nil)
		event(t, "j-store")
		if code, reason := closedWith(t, c); code != websocket.StatusTryAgainLater || reason != noQuorum {
			t.Fatalf("closed with %d %q, want 1013 %q", code, reason, noQuorum)
		}
	})

	t.Run("a journal failing otherwise closes with 1012", func(t *testing.T) {
		c := connected(t, "j-other")
		st.failWith(errors.New("store: session written by another owner"))
		defer st.failWith(nil)
		event(t, "j-other")
		if code, reason := closedWith(t, c); code != websocket.StatusServiceRestart || !strings.Contains(reason, "another node") {
			t.Fatalf("closed with %d %q, want 1012 (moves to another node)", code, reason)
		}
	})

	t.Run("a lease lapsed for the store closes with 1013", func(t *testing.T) {
		c := connected(t, "l-store")
		mu.Lock()
		l := held["l-store"]
		mu.Unlock()
		l.lose(errors.Join(errors.New("store: session lease lost: not renewed within 16s"), &storeDown{noQuorum}))
		if code, reason := closedWith(t, c); code != websocket.StatusTryAgainLater || reason != noQuorum {
			t.Fatalf("closed with %d %q, want 1013 %q", code, reason, noQuorum)
		}
	})

	t.Run("a request the store cannot serve is 503 with the sentence", func(t *testing.T) {
		down := error(&storeDown{noQuorum})
		leaseErr.Store(&down)
		defer leaseErr.Store(nil)
		req, _ := http.NewRequest("GET", hs.URL+"/v1/sessions/fresh/ws", nil)
		req.Header.Set("Authorization", "Bearer "+clientToken)
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
			req.Header.Set(k, v) // a handshake: anything else is refused before the store is asked
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Code, Message string }
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Code != "unavailable" || e.Message != noQuorum || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s %s (Retry-After %q), want 503 unavailable %q", resp.Status, body, resp.Header.Get("Retry-After"), noQuorum)
		}
	})

	t.Run("readyz", func(t *testing.T) {
		get := func() (int, string) {
			resp, err := http.Get(hs.URL + "/readyz") // no token: a load balancer asks
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := get(); code != 200 || body != "ready\n" {
			t.Fatalf("ready: %d %q", code, body)
		}
		down := errors.New(noQuorum)
		ready.Store(&down)
		if code, body := get(); code != 503 || !strings.Contains(body, `"message":"`+noQuorum+`"`) {
			t.Fatalf("store down: %d %q", code, body)
		}
		ready.Store(nil)
		mgr.Stop(context.Background())
		if code, body := get(); code != 503 || !strings.Contains(body, "the node is stopping") {
			t.Fatalf("stopping: %d %q", code, body)
		}
	})
}
