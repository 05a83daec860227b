package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// TestSingleNodeJournalFailure: on a node of its own, an event the store
// refuses (its disk full) is shown to nobody: the session's connections
// close with 1013 and the store's sentence, without that event or the
// reply to the command that caused it, and the next connection finds the
// session as its journal holds it, carrying on with no gap in its seqs. A
// probe's client had been shown seq 308 of a session that, restarted,
// ended at 307.
func TestSingleNodeJournalFailure(t *testing.T) {
	// /readyz says so for a while after the failure (below): long enough
	// for the test's next request, whatever the machine's load.
	server.SetJournalFaultFor(t, 30*time.Second)
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	st := &faultStore{failStore: failStore{events: map[string][]session.Event{}}}
	mgr := server.NewManager(server.ManagerOptions{Store: st}) // no lease: a node of its own
	hs := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr}))
	t.Cleanup(hs.Close)
	n := &node{id: "solo", url: hs.URL}
	stored := func() []session.Event {
		st.mu.Lock()
		defer st.mu.Unlock()
		return append([]session.Event(nil), st.events["s"]...)
	}

	c := dialNode(t, n, "s", "", 5*time.Second)
	c.until(ofType(protocol.TypeSnapshot))
	c.send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.one", false)}})
	c.until(func(f *protocol.Frame) bool { return f.Ref == "r1" })
	before := stored()
	last := before[len(before)-1].Seq

	const full = "the store cannot write: no space left on its disk"
	st.failWith(&storeDown{full})
	c.send("r2", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.two", false)}})
	for {
		f, err := c.next()
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusTryAgainLater || ce.Reason != full {
				t.Fatalf("the connection ended with %v, want 1013 %q", err, full)
			}
			break
		}
		if f.Seq > last || f.Ref == "r2" {
			t.Fatalf("the peer was shown what the journal does not hold: seq %d %s (ref %q); the journal ends at %d", f.Seq, f.Msg.MessageType(), f.Ref, last)
		}
	}
	st.failWith(nil)
	// The node says it, as a load balancer asks (it had stayed ready while
	// a full disk refused every append).
	if code, body := readyz(t, hs.URL); code != http.StatusServiceUnavailable || !strings.Contains(body, full) {
		t.Fatalf("/readyz after the failure: %d %s", code, body)
	}
	server.SetJournalFaultFor(t, 0) // past it: ready again
	if code, body := readyz(t, hs.URL); code != http.StatusOK {
		t.Fatalf("/readyz once the failure is past: %d %s", code, body)
	}

	// Reconnected after the last seq it saw: the session as its journal
	// holds it, and its next event follows that seq.
	c2 := dialNode(t, n, "s", "?after=0", 5*time.Second)
	c2.send("r3", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.two", false)}})
	ack := c2.until(func(f *protocol.Frame) bool { return f.Ref == "r3" })
	if _, ok := ack.Msg.(*protocol.Ack); !ok {
		t.Fatalf("registering again: %+v", ack.Msg)
	}
	after := stored()
	for i, e := range after {
		if e.Seq != uint64(i+1) {
			t.Fatalf("the journal has seq %d at %d: a gap or a repeat", e.Seq, i+1)
		}
	}
	if len(after) <= len(before) {
		t.Fatalf("nothing was journaled after the failure: %d events", len(after))
	}

	// A failure the store does not explain: 1012, the session loaded
	// again (a single node has no other node to move it to).
	c3 := dialNode(t, n, "s", "", 5*time.Second)
	c3.until(ofType(protocol.TypeSnapshot))
	st.failWith(errors.New("store: append: i/o error"))
	c3.send("r4", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.three", false)}})
	if code, reason := closedWith(t, c3); code != websocket.StatusServiceRestart || !strings.Contains(reason, "loaded again") {
		t.Fatalf("closed with %d %q, want 1012 saying the session is loaded again", code, reason)
	}
	st.failWith(nil)
}

// readyz is GET /readyz on the server at url: the status and the body.
func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// deletingStore is a faultStore whose Delete makes every later append
// fail, as the store's does for a session it no longer holds.
type deletingStore struct{ faultStore }

func (st *deletingStore) Delete(context.Context, string) error {
	st.failWith(errors.New("wrong last sequence: the session's events were deleted"))
	return nil
}

// TestDeleteIsNoJournalFault: what a deleted session does after its
// delete (a turn that ends as it is cancelled, a timer) is not stored and
// is no fault of the store's: the node stays ready. A probe's delete
// during a running turn logged "journal append failed" twice, and the
// first failure made /readyz 503 for 30 s.
func TestDeleteIsNoJournalFault(t *testing.T) {
	server.SetJournalFaultFor(t, 30*time.Second)
	st := &deletingStore{faultStore{failStore: failStore{events: map[string][]session.Event{}}}}
	mgr := server.NewManager(server.ManagerOptions{Store: st})
	hs := httptest.NewServer(server.New(server.Options{Manager: mgr}))
	t.Cleanup(hs.Close)
	s, release, err := mgr.Acquire(testutil.Context(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := mgr.Delete(testutil.Context(t), "s"); err != nil {
		t.Fatal(err)
	}
	// The deleted session's object emits an event after the delete.
	if err := s.Register(session.Client, clientCap("ui.late", false)); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(t, hs.URL); code != http.StatusOK {
		t.Fatalf("/readyz after a delete: %d %s, want 200", code, body)
	}
}
