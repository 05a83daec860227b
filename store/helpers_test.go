package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// open opens a store on dir with the embedded server and closes it when the
// test ends.
func open(t testing.TB, dir string, opts *store.Options) *store.Store {
	t.Helper()
	o := store.Options{}
	if opts != nil {
		o = *opts
	}
	o.DataDir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, &o)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// ctx returns a context bounded for one test step.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// ev is a small event whose content names its writer.
func ev(seq uint64, by string) session.Event {
	return session.Event{Seq: seq, Msg: &protocol.CapabilityDeregister{Names: []string{fmt.Sprintf("%s.%d", by, seq)}}}
}

// writer returns who wrote an event made by ev.
func writer(e session.Event) string {
	if m, ok := e.Msg.(*protocol.CapabilityDeregister); ok && len(m.Names) == 1 {
		return m.Names[0]
	}
	return fmt.Sprintf("%T", e.Msg)
}

func journal(t testing.TB, st *store.Store, id string) session.Journal {
	t.Helper()
	j, err := st.Journal(id)
	if err != nil {
		t.Fatalf("journal %q: %v", id, err)
	}
	return j
}

func appendAll(t testing.TB, j session.Journal, events ...session.Event) {
	t.Helper()
	for _, e := range events {
		if err := j.Append(e); err != nil {
			t.Fatalf("append seq %d: %v", e.Seq, err)
		}
	}
}

func load(t testing.TB, st *store.Store, id string) []session.Event {
	t.Helper()
	events, err := st.Load(ctx(t), id)
	if err != nil {
		t.Fatalf("load %q: %v", id, err)
	}
	return events
}

// seqs lists the events' seqs.
func seqs(events []session.Event) []uint64 {
	out := make([]uint64, len(events))
	for i, e := range events {
		out[i] = e.Seq
	}
	return out
}

// checkContiguous fails unless the events have seqs first, first+1, ….
func checkContiguous(t testing.TB, events []session.Event, first uint64) {
	t.Helper()
	for i, e := range events {
		if e.Seq != first+uint64(i) {
			t.Fatalf("event %d has seq %d, want %d (seqs %v)", i, e.Seq, first+uint64(i), seqs(events))
		}
	}
}

// frames encodes events, to compare them.
func frames(t testing.TB, events []session.Event) []string {
	t.Helper()
	out := make([]string, len(events))
	for i, e := range events {
		b, err := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func clientCap(name string, approval bool) protocol.Capability {
	return protocol.Capability{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}, RequiresApproval: approval}
}

// waitForType reads sub until a message of type typ, failing after a few
// seconds.
func waitForType(t testing.TB, sub *session.Subscription, typ protocol.Type) session.Event {
	t.Helper()
	c := ctx(t)
	for {
		e, err := sub.Next(c)
		if err != nil {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		if e.Msg.MessageType() == typ {
			return e
		}
	}
}
