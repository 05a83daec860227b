package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// TestRestartReattachAppendsNothing: an environment's tools, registered
// again on every restart (Attach), append no capability_register event
// when nothing about them changed; a changed tool appends one.
func TestRestartReattachAppendsNothing(t *testing.T) {
	dir := t.TempDir()
	tool := protocol.Capability{Name: "env.echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
	echo := session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })
	// run starts a kernel on dir, opens session "rs" and returns the events
	// the store holds for it when the kernel stops.
	run := func(desc string) []session.Event {
		t.Helper()
		st, err := store.Open(testutil.Context(t), &store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		c := tool
		c.Description = desc
		mgr := server.NewManager(server.ManagerOptions{Store: st, Attach: func(s *session.Session) error {
			return s.RegisterAgent(c, echo)
		}})
		s, release, err := mgr.Acquire(testutil.Context(t), "rs")
		if err != nil {
			t.Fatal(err)
		}
		if out := s.Invoke(testutil.Context(t), protocol.AudienceLLM, "env.echo", json.RawMessage(`{}`)); out.Err != nil {
			t.Fatalf("call after start: %v", out.Err)
		}
		release()
		events, err := st.Load(testutil.Context(t), "rs")
		if err != nil {
			t.Fatal(err)
		}
		return events
	}
	registers := func(events []session.Event) int {
		n := 0
		for _, e := range events {
			if e.Msg.MessageType() == protocol.TypeCapabilityRegister {
				n++
			}
		}
		return n
	}
	first := run("Echo.")
	if registers(first) != 1 {
		t.Fatalf("first start: %d capability_register events, want 1", registers(first))
	}
	for i := range 2 {
		again := run("Echo.")
		if n := registers(again); n != 1 {
			t.Fatalf("restart %d: %d capability_register events, want still 1 (an unchanged tool re-registered emitted one)", i+1, n)
		}
	}
	changed := run("Echo, changed.")
	if n := registers(changed); n != 2 {
		t.Fatalf("a changed tool: %d capability_register events, want 2", n)
	}
}

// TestJournalBytesWithStore: with package store, the journal bytes of a
// session are what the store holds — counted by the store's journal, and
// from the stored events after a restart.
func TestJournalBytesWithStore(t *testing.T) {
	dir := t.TempDir()
	open := func() (*store.Store, *server.Manager) {
		st, err := store.Open(testutil.Context(t), &store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return st, server.NewManager(server.ManagerOptions{Store: st})
	}
	stored := func(st *store.Store) int64 {
		events, err := st.Load(testutil.Context(t), "jb")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, e := range events {
			b, _ := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
			n += int64(len(b))
		}
		return n
	}
	st, mgr := open()
	s, release, err := mgr.Acquire(testutil.Context(t), "jb")
	if err != nil {
		t.Fatal(err)
	}
	c := protocol.Capability{Name: "ui.x", Description: "X.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}}
	if err := s.Register(session.Client, c); err != nil {
		t.Fatal(err)
	}
	want := stored(st)
	if got := mgr.JournalBytes(s); got != want || got == 0 {
		t.Fatalf("JournalBytes = %d, the store holds %d", got, want)
	}
	release()
	_ = st.Close()

	st, mgr = open()
	defer st.Close()
	s, release, err = mgr.Acquire(testutil.Context(t), "jb")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	c.Description = "X, again."
	if err := s.Register(session.Client, c); err != nil {
		t.Fatal(err)
	}
	if got, want := mgr.JournalBytes(s), stored(st); got != want {
		t.Fatalf("after a restart JournalBytes = %d, the store holds %d", got, want)
	}
}
