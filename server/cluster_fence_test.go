package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// failStore is a store whose appends can be made to fail, for the fence's
// tests: what it holds is what a node taking a session over restores.
type failStore struct {
	mu     sync.Mutex
	events map[string][]session.Event
	fail   atomic.Bool
}

type failJournal struct {
	st *failStore
	id string
}

func (j failJournal) Append(e session.Event) error {
	if j.st.fail.Load() {
		return errors.New("failStore: append refused (a lost NATS connection)")
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	j.st.events[j.id] = append(j.st.events[j.id], e)
	return nil
}

func (st *failStore) Journal(id string) (session.Journal, error) { return failJournal{st, id}, nil }

func (st *failStore) Load(_ context.Context, id string) ([]session.Event, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]session.Event(nil), st.events[id]...), nil
}

// soleLease is a lease nobody else contends for.
type soleLease struct {
	once sync.Once
	lost chan struct{}
}

func (l *soleLease) Lost() <-chan struct{} { return l.lost }
func (l *soleLease) Valid() bool {
	select {
	case <-l.lost:
		return false
	default:
		return true
	}
}
func (l *soleLease) Release(context.Context) error { l.once.Do(func() { close(l.lost) }); return nil }

// TestClusterFence: on a clustered node, a peer is shown only what the
// journal stored. An append that fails ends the connection before its
// event or reply is written; the session is handed over; the peer
// reconnects with its last seq and the restored session goes on from
// there, no seq reused. An invoke whose call's first event could not be
// stored is never acknowledged.
func TestClusterFence(t *testing.T) {
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	st := &failStore{events: map[string][]session.Event{}}
	var leases atomic.Int64
	mgr := server.NewManager(server.ManagerOptions{Store: st, Node: "n1",
		Lease: func(context.Context, string) (server.Lease, error) {
			leases.Add(1)
			return &soleLease{lost: make(chan struct{})}, nil
		}})
	hs := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr}))
	t.Cleanup(hs.Close)
	n := &node{id: "n1", url: hs.URL}
	echo := clientCap("ui.echo", false)
	echo.Audience = []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}

	// closes reads c until the connection ends, failing on any frame that
	// bad matches.
	closes := func(t *testing.T, c *clusterPeer, bad func(*protocol.Frame) bool) {
		t.Helper()
		for {
			f, err := c.next()
			if err != nil {
				return
			}
			if bad(f) {
				b, _ := json.Marshal(f.Msg)
				t.Fatalf("a frame the journal did not store reached the peer: seq %d ref %q %s %s", f.Seq, f.Ref, f.Msg.MessageType(), b)
			}
		}
	}
	// resume reconnects after seq and registers name: the registration's
	// event must be seq+1 (nothing in between, nothing reused).
	resume := func(t *testing.T, sid string, seq uint64, name string) (*clusterPeer, uint64) {
		t.Helper()
		c := dialNode(t, n, sid, fmt.Sprintf("?after=%d", seq), 5*time.Second)
		c.send("again", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap(name, false)}})
		for {
			f, err := c.next()
			if err != nil {
				t.Fatalf("read after reconnecting: %v", err)
			}
			if f.Ref == "" && f.Seq != 0 {
				if f.Seq != seq+1 {
					t.Fatalf("after reconnecting with ?after=%d the next event is seq %d (%s)", seq, f.Seq, f.Msg.MessageType())
				}
				if reg, ok := f.Msg.(*protocol.CapabilityRegister); !ok || reg.Capabilities[0].Name != name {
					t.Fatalf("after reconnecting the next event is %s", f.Msg.MessageType())
				}
				return c, f.Seq
			}
		}
	}

	// registered reads c until both the ack of registration ref and its
	// event have arrived (in either order), and returns the event.
	registered := func(c *clusterPeer, ref string) *protocol.Frame {
		var ev *protocol.Frame
		acked := false
		for ev == nil || !acked {
			f := c.until(func(f *protocol.Frame) bool {
				return f.Ref == ref || (f.Ref == "" && f.Msg.MessageType() == protocol.TypeCapabilityRegister)
			})
			if f.Ref == ref {
				acked = true
			} else {
				ev = f
			}
		}
		return ev
	}

	t.Run("an event that was not stored is never shown", func(t *testing.T) {
		c := dialNode(t, n, "ev", "", 5*time.Second)
		snap := c.until(ofType(protocol.TypeSnapshot))
		c.send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{echo}})
		reg := registered(c, "r1")
		if reg.Seq != snap.Seq+1 {
			t.Fatalf("registration at seq %d after snapshot %d", reg.Seq, snap.Seq)
		}
		before := leases.Load()
		st.fail.Store(true)
		// The model calls the peer's capability: no reply on the
		// connection, only the capability_invoked the journal refuses.
		s, release, err := mgr.Acquire(context.Background(), "ev")
		if err != nil {
			t.Fatal(err)
		}
		if _, perr := s.Start(protocol.AudienceLLM, "ui.echo", json.RawMessage(`{"n":1}`)); perr != nil {
			t.Fatal(perr)
		}
		release()
		closes(t, c, func(f *protocol.Frame) bool { return f.Seq > reg.Seq })
		st.fail.Store(false)
		_, seq := resume(t, "ev", reg.Seq, "ui.back")
		if leases.Load() == before {
			t.Fatal("the session was not handed over: no new lease")
		}
		if events, _ := st.Load(context.Background(), "ev"); uint64(len(events)) != seq || strings.Contains(fmt.Sprint(events), "invoked") {
			t.Fatalf("stored %d events up to seq %d", len(events), seq)
		}
	})

	t.Run("an invoke whose call was not stored is never acknowledged", func(t *testing.T) {
		c := dialNode(t, n, "ack", "", 5*time.Second)
		c.until(ofType(protocol.TypeSnapshot))
		c.send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{echo}})
		reg := registered(c, "r1")
		st.fail.Store(true) // the call's capability_invoked will not be stored
		c.send("u1", &protocol.CapabilityInvoke{Name: "ui.echo", Input: json.RawMessage(`{"n":1}`)})
		closes(t, c, func(f *protocol.Frame) bool { return f.Ref == "u1" || f.Seq > reg.Seq })
		st.fail.Store(false)
		r, seq := resume(t, "ack", reg.Seq, "ui.back")
		// The call is unknown to the restored session, as it was to the
		// peer: invoking again starts it and it ends.
		r.send("u2", &protocol.CapabilityInvoke{Name: "ui.echo", Input: json.RawMessage(`{"n":2}`)})
		var call string
		for {
			f := r.until(func(f *protocol.Frame) bool { return f.Ref == "u2" || f.Seq > seq })
			if a, ok := f.Msg.(*protocol.Ack); ok && f.Ref == "u2" {
				call = a.CallID
				continue
			}
			if f.Ref != "" {
				continue
			}
			if f.Seq != seq+1 {
				t.Fatalf("seq %d after %d", f.Seq, seq)
			}
			seq = f.Seq
			if inv, ok := f.Msg.(*protocol.CapabilityInvoked); ok {
				r.send("x", &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{"n":2}`)})
			}
			if out, ok := f.Msg.(*protocol.CapabilityOutcome); ok {
				if call == "" || out.CallID != call || !out.Outcome.IsOK() {
					t.Fatalf("outcome %+v for call %q", out, call)
				}
				return
			}
		}
	})
}
