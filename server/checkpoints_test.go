package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// TestHibernateCheckpoints: a session the manager hibernates is
// checkpointed, and wakes — after a restart too — from its checkpoint,
// as it was: its registrations, its journal bytes, and every event
// replayed to a subscriber from the start. (A session with a call
// pending is not hibernated; store's TestCheckpointWake restores one.)
func TestHibernateCheckpoints(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	echo := session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })
	tool := protocol.Capability{Name: "env.echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
	open := func() (*store.Store, *server.Manager) {
		st, err := store.Open(testutil.Context(t), &store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st, server.NewManager(server.ManagerOptions{Store: st, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Attach: func(s *session.Session) error { return s.RegisterAgent(tool, echo) }})
	}
	replay := func(s *session.Session) string {
		sub := s.Subscribe(0)
		defer sub.Close()
		var b strings.Builder
		for seq := uint64(0); seq < s.LastSeq(); {
			e, err := sub.Next(testutil.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			seq = e.Seq
			f, _ := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
			fmt.Fprintf(&b, "%s\n", f)
		}
		return b.String()
	}

	st, mgr := open()
	s, release, err := mgr.Acquire(testutil.Context(t), "hc")
	if err != nil {
		t.Fatal(err)
	}
	show := protocol.Capability{Name: "ui.show", Description: "Show.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}}
	if err := s.Register(session.Client, show); err != nil {
		t.Fatal(err)
	}
	calls := func(s *session.Session, n int) {
		for i := range n {
			if out := s.Invoke(testutil.Context(t), protocol.AudienceLLM, "env.echo", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); !out.IsOK() {
				t.Fatal(out.Err)
			}
		}
	}
	calls(s, 100)
	want := func(s *session.Session) (string, uint64, int64) { return replay(s), s.LastSeq(), mgr.JournalBytes(s) }
	wantReplay, wantSeq, wantBytes := want(s)
	release()
	hibernate := func() {
		t.Helper()
		if n := mgr.Hibernate(0); n != 1 {
			t.Fatalf("hibernated %d sessions, want 1", n)
		}
		if !mgr.CheckpointsWritten(testutil.Context(t)) {
			t.Fatal("the checkpoint was not written")
		}
	}
	woken := func() (*session.Session, func()) {
		t.Helper()
		logs.Reset()
		s, release, err := mgr.Acquire(testutil.Context(t), "hc")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "session restored") || !strings.Contains(logs.String(), "checkpoint=") || !strings.Contains(logs.String(), "events_after=0") {
			t.Fatalf("the session was not woken from a checkpoint of all its events:\n%s", logs.String())
		}
		if got, seq, n := replay(s), s.LastSeq(), mgr.JournalBytes(s); got != wantReplay || seq != wantSeq || n != wantBytes {
			t.Fatalf("woken from its checkpoint: at seq %d (want %d), journal bytes %d (want %d), replaying\n%.3000s\nwant\n%.3000s", seq, wantSeq, n, wantBytes, got, wantReplay)
		}
		return s, release
	}
	hibernate()
	s, release = woken()
	if _, ok := s.Lookup("ui.show"); !ok {
		t.Fatal("the client's registration did not come back")
	}
	calls(s, 10)
	wantReplay, wantSeq, wantBytes = want(s)
	release()
	hibernate()
	_ = st.Close()

	st, mgr = open() // a restart
	s, release = woken()

	// A graceful stop checkpoints the sessions in memory, a session with a
	// connection or a call pending among them (a checkpoint is not an
	// event: the stop still writes nothing into a session).
	calls(s, 10)
	if _, perr := s.Start(protocol.AudienceLLM, "ui.show", json.RawMessage(`{}`)); perr != nil {
		t.Fatal(perr)
	}
	wantReplay, wantSeq, wantBytes = want(s)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mgr.Stop(stopCtx)
	if err := mgr.Close(stopCtx); err != nil {
		t.Fatal(err)
	}
	release()
	if !strings.Contains(logs.String(), `"sessions checkpointed for the stop" done=1 left=0`) {
		t.Fatalf("the stop did not checkpoint the session:\n%s", logs.String())
	}
	_ = st.Close()
	_, mgr = open()
	s, release = woken()
	defer release()
	if snap := s.Snapshot(); len(snap.PendingCalls) != 1 {
		t.Fatalf("the call pending at the stop: %+v", snap.PendingCalls)
	}
}
