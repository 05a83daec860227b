package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/store"
)

// TestResumeReadsBackFromStore: a journaled session keeps only its latest
// events in memory (session.Options.LogMemory); a client resuming
// further back gets every event it missed, in order, read back from the
// store — not a snapshot — while an app, which sees its own calls by
// their owner (which the store does not record), gets a snapshot there,
// and its events replayed from memory.
func TestResumeReadsBackFromStore(t *testing.T) {
	f, _ := newLimited(t, server.ManagerOptions{Store: tempStore(t)}, server.Options{})
	c := f.dial(clientToken, "s1", "?after=0")
	const n = 100 // events, one registration each: far more than the 32 kept in memory
	for i := range n {
		id := fmt.Sprint("r", i)
		c.send(id, &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap(fmt.Sprint("c.", i), false)}})
		c.reply(id)
	}
	c.conn.CloseNow()

	for _, after := range []int{0, 5, 67, 99} {
		r := f.dial(clientToken, "s1", fmt.Sprintf("?after=%d", after))
		for want := after + 1; want <= n; want++ {
			ev := r.until(func(f *protocol.Frame) bool { return f.Ref == "" })
			reg, ok := ev.Msg.(*protocol.CapabilityRegister)
			if !ok || ev.Seq != uint64(want) || reg.Capabilities[0].Name != fmt.Sprint("c.", want-1) {
				t.Fatalf("resumed after %d: got seq %d %s, want seq %d registering c.%d", after, ev.Seq, ev.Msg.MessageType(), want, want-1)
			}
		}
		r.conn.CloseNow()
	}

	app := f.dial(appToken, "s1", "?after=5")
	if ev := app.until(func(f *protocol.Frame) bool { return f.Ref == "" }); ev.Msg.MessageType() != protocol.TypeSnapshot || ev.Seq != n {
		t.Fatalf("an app resuming behind memory: got seq %d %s, want a snapshot at %d", ev.Seq, ev.Msg.MessageType(), n)
	}
	app.conn.CloseNow()
	app = f.dial(appToken, "s1", fmt.Sprintf("?after=%d", n-3))
	if ev := app.until(func(f *protocol.Frame) bool { return f.Ref == "" }); ev.Msg.MessageType() != protocol.TypeCapabilityRegister || ev.Seq != n-2 {
		t.Fatalf("an app resuming within memory: got seq %d %s, want seq %d", ev.Seq, ev.Msg.MessageType(), n-2)
	}
}

// TestResumeReadsBackLargeEventsFromStore: events too large to stay in
// memory together (a session keeps about session.DefaultLogMemoryBytes
// of their values) reach a client resuming behind them whole and in
// order, read back from the store, though they are within the 32
// LogMemory keeps by count.
func TestResumeReadsBackLargeEventsFromStore(t *testing.T) {
	f, _ := newLimited(t, server.ManagerOptions{Store: tempStore(t)}, server.Options{})
	c := f.dial(clientToken, "s1", "?after=0")
	const n, size = 8, 300 << 10 // 2.4 MB of descriptions: over the 1 MiB budget
	description := func(i int) string { return fmt.Sprint(i) + strings.Repeat("d", size) }
	for i := range n {
		id := fmt.Sprint("r", i)
		cp := clientCap(fmt.Sprint("c.", i), false)
		cp.Description = description(i)
		c.send(id, &protocol.CapabilityRegister{Capabilities: []protocol.Capability{cp}})
		c.reply(id)
	}
	c.conn.CloseNow()
	r := f.dial(clientToken, "s1", "?after=0")
	for want := 1; want <= n; want++ {
		ev := r.until(func(f *protocol.Frame) bool { return f.Ref == "" })
		reg, ok := ev.Msg.(*protocol.CapabilityRegister)
		if !ok || ev.Seq != uint64(want) || reg.Capabilities[0].Description != description(want-1) {
			t.Fatalf("got seq %d %s, want seq %d registering c.%d with its description", ev.Seq, ev.Msg.MessageType(), want, want-1)
		}
	}
}

// tempStore is an embedded store in a temporary directory, closed at the
// test's end.
func tempStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), &store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
