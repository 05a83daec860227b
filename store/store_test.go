package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// TestRestoreThroughStore runs a session on a store journal up to a pending
// approval, restores it from what the store loads, and finishes the call on
// the restored session: every event lands in the store, in order, and the
// old owner can no longer append.
func TestRestoreThroughStore(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	j1 := journal(t, st, "s1")
	s := session.New("s1", &session.Options{Journal: j1})
	if err := s.Register(session.Client, clientCap("ui.confirm", true)); err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(0)
	callID, perr := s.Start(protocol.AudienceLLM, "ui.confirm", json.RawMessage(`{"n":1}`))
	if perr != nil {
		t.Fatal(perr)
	}
	digest := waitForType(t, sub, protocol.TypeApprovalRequested).Msg.(*protocol.ApprovalRequested).InputDigest
	sub.Close()
	last := s.LastSeq()

	events := load(t, st, "s1")
	if uint64(len(events)) != last {
		t.Fatalf("store holds %d events, the session emitted %d", len(events), last)
	}
	checkContiguous(t, events, 1)

	j2 := journal(t, st, "s1")
	r, err := session.Restore("s1", events, &session.Options{Journal: j2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub2 := r.Subscribe(last)
	defer sub2.Close()
	if err := r.Approve(session.Client, &protocol.CapabilityApprove{CallID: callID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: digest}); err != nil {
		t.Fatal(err)
	}
	waitForType(t, sub2, protocol.TypeCapabilityInvoked)
	if err := r.Result(session.Client, &protocol.CapabilityResult{CallID: callID, Result: json.RawMessage(`"confirmed"`)}); err != nil {
		t.Fatal(err)
	}
	waitForType(t, sub2, protocol.TypeCapabilityOutcome)

	events = load(t, st, "s1")
	if uint64(len(events)) != r.LastSeq() {
		t.Fatalf("store holds %d events, the restored session emitted %d", len(events), r.LastSeq())
	}
	checkContiguous(t, events, 1)
	out, ok := events[len(events)-1].Msg.(*protocol.CapabilityOutcome)
	if !ok || out.CallID != callID || string(out.Outcome.Value) != `"confirmed"` {
		t.Fatalf("last stored event = %#v, want the call's outcome", events[len(events)-1].Msg)
	}

	// The old session still thinks it owns the call; what it emits now must
	// not reach the store.
	_ = s.Cancel(callID, "old owner")
	if err := j1.Append(ev(r.LastSeq()+1, "old")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("old owner's append: %v, want ErrConflict", err)
	}
	if got := load(t, st, "s1"); len(got) != len(events) {
		t.Fatalf("store holds %d events after the old owner wrote, want %d", len(got), len(events))
	}
}

// TestReopen closes the store and opens a new embedded server on the same
// directory: the events come back, and a journal continues them.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	j := journal(t, st, "kept")
	s := session.New("kept", &session.Options{Journal: j})
	if err := s.Register(session.Client, clientCap("ui.a", false), clientCap("ui.b", true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Deregister(session.Client, "ui.a"); err != nil {
		t.Fatal(err)
	}
	appendAll(t, journal(t, st, "other"), ev(1, "o"))
	before := load(t, st, "kept")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ev(s.LastSeq()+1, "late")); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
	if _, err := st.Load(context.Background(), "kept"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("load after close: %v, want ErrClosed", err)
	}

	st2 := open(t, dir, nil)
	after := load(t, st2, "kept")
	if !slices.Equal(frames(t, before), frames(t, after)) {
		t.Fatalf("events after reopening:\n%v\nwant\n%v", frames(t, after), frames(t, before))
	}
	ids, err := st2.Sessions(ctx(t))
	if err != nil || !slices.Equal(ids, []string{"kept", "other"}) {
		t.Fatalf("Sessions = %v, %v", ids, err)
	}
	r, err := session.Restore("kept", after, &session.Options{Journal: journal(t, st2, "kept")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("ui.b"); !ok {
		t.Error("ui.b was not restored")
	}
	if _, ok := r.Lookup("ui.a"); ok {
		t.Error("ui.a was restored after its deregistration")
	}
	if err := r.Deregister(session.Client, "ui.b"); err != nil {
		t.Fatal(err)
	}
	got := load(t, st2, "kept")
	checkContiguous(t, got, 1)
	if len(got) != len(after)+1 {
		t.Fatalf("%d events after one more, want %d", len(got), len(after)+1)
	}
}

func TestSessionIDs(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	tests := []struct {
		name, id string
		valid    bool
	}{
		{"letters digits dash underscore", "Ab-9_z", true},
		{"one character", "x", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"empty", "", false},
		{"129 characters", strings.Repeat("a", 129), false},
		{"dot splits a subject token", "a.b", false},
		{"star wildcard", "a*", false},
		{"gt wildcard", ">", false},
		{"space", "a b", false},
		{"slash", "a/b", false},
		{"non-ASCII", "sé", false},
		{"control character", "a\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ctx(t)
			_, jerr := st.Journal(tt.id)
			_, lerr := st.Load(c, tt.id)
			derr := st.Delete(c, tt.id)
			for op, err := range map[string]error{"Journal": jerr, "Load": lerr, "Delete": derr} {
				if tt.valid && err != nil {
					t.Errorf("%s(%q): %v", op, tt.id, err)
				}
				if !tt.valid && !errors.Is(err, store.ErrInvalidSessionID) {
					t.Errorf("%s(%q): %v, want ErrInvalidSessionID", op, tt.id, err)
				}
			}
		})
	}
}

func TestSessionsAndDelete(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	if ids, err := st.Sessions(ctx(t)); err != nil || len(ids) != 0 {
		t.Fatalf("Sessions of an empty store = %v, %v", ids, err)
	}
	held := map[string]session.Journal{}
	for _, id := range []string{"c", "a", "b"} {
		held[id] = journal(t, st, id)
		appendAll(t, held[id], ev(1, id), ev(2, id))
	}
	ids, err := st.Sessions(ctx(t))
	if err != nil || !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("Sessions = %v, %v", ids, err)
	}

	if err := st.Delete(ctx(t), "b"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx(t), "never-stored"); err != nil {
		t.Fatalf("deleting an unknown session: %v", err)
	}
	ids, err = st.Sessions(ctx(t))
	if err != nil || !slices.Equal(ids, []string{"a", "c"}) {
		t.Fatalf("Sessions after deleting b = %v, %v", ids, err)
	}
	if got := load(t, st, "b"); len(got) != 0 {
		t.Fatalf("deleted session loads %v", seqs(got))
	}
	if got := load(t, st, "a"); len(got) != 2 {
		t.Fatalf("session a lost events: %v", seqs(got))
	}
	// The journal that owned b is fenced off.
	if err := held["b"].Append(ev(3, "b")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append to a deleted session: %v, want ErrConflict", err)
	}
	// The id can be used again at once, although JetStream still remembers
	// the deleted events' message ids.
	appendAll(t, journal(t, st, "b"), ev(1, "new-b"), ev(2, "new-b"))
	got := load(t, st, "b")
	checkContiguous(t, got, 1)
	if len(got) != 2 || writer(got[0]) != "new-b.1" {
		t.Fatalf("reused id holds %v", got)
	}
}

// TestOwners: a session's events come from one journal at a time, never
// interleave, and a seq is never stored twice.
func TestOwners(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, st *store.Store) // appends to session "s"
		want []string                            // writers of the stored events
	}{
		{
			name: "two journals append the same seq",
			run: func(t *testing.T, st *store.Store) {
				a, b := journal(t, st, "s"), journal(t, st, "s")
				appendAll(t, a, ev(1, "a"))
				if err := b.Append(ev(1, "b")); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("second journal's append: %v, want ErrConflict", err)
				}
				if err := b.Append(ev(2, "b")); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("second journal's next append: %v, want ErrConflict", err)
				}
				appendAll(t, a, ev(2, "a"))
			},
			want: []string{"a.1", "a.2"},
		},
		{
			name: "a newer journal takes over",
			run: func(t *testing.T, st *store.Store) {
				a := journal(t, st, "s")
				appendAll(t, a, ev(1, "a"), ev(2, "a"))
				b := journal(t, st, "s")
				if err := b.Append(ev(2, "b")); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("append of a stored seq: %v, want ErrConflict", err)
				}
				appendAll(t, b, ev(3, "b"))
				if err := a.Append(ev(3, "a")); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("old owner's append: %v, want ErrConflict", err)
				}
				appendAll(t, b, ev(4, "b"))
			},
			want: []string{"a.1", "a.2", "b.3", "b.4"},
		},
		{
			name: "a journal repeats a seq",
			run: func(t *testing.T, st *store.Store) {
				a := journal(t, st, "s")
				appendAll(t, a, ev(1, "a"))
				if err := a.Append(ev(1, "again")); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("repeated seq: %v, want ErrConflict", err)
				}
				if err := a.Append(ev(3, "gap")); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("gap: %v, want ErrConflict", err)
				}
				appendAll(t, a, ev(2, "a"))
			},
			want: []string{"a.1", "a.2"},
		},
		{
			name: "a journal may start after seq 1",
			run: func(t *testing.T, st *store.Store) {
				appendAll(t, journal(t, st, "s"), ev(7, "a"), ev(8, "a"))
			},
			want: []string{"a.7", "a.8"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := open(t, t.TempDir(), nil)
			tt.run(t, st)
			got := load(t, st, "s")
			var writers []string
			for _, e := range got {
				writers = append(writers, writer(e))
			}
			if !slices.Equal(writers, tt.want) {
				t.Fatalf("stored %v, want %v", writers, tt.want)
			}
		})
	}
}

// TestRacingJournals: journals appending to one session at the same time
// leave the events of exactly one of them, each seq once.
func TestRacingJournals(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	const n = 50
	var wg sync.WaitGroup
	for _, by := range []string{"a", "b", "c", "d"} {
		j := journal(t, st, "s")
		wg.Go(func() {
			for seq := uint64(1); seq <= n; seq++ {
				if err := j.Append(ev(seq, by)); err != nil {
					if !errors.Is(err, store.ErrConflict) {
						t.Errorf("journal %s: %v", by, err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	got := load(t, st, "s")
	if len(got) != n {
		t.Fatalf("stored %d events, want %d", len(got), n)
	}
	checkContiguous(t, got, 1)
	winner, _, _ := strings.Cut(writer(got[0]), ".")
	for _, e := range got {
		if w := writer(e); w != fmt.Sprintf("%s.%d", winner, e.Seq) {
			t.Fatalf("event %d written by %s, the first by journal %s", e.Seq, w, winner)
		}
	}
}

// TestRetention keeps the latest events of each session; a restore starts
// from the oldest one kept.
func TestRetention(t *testing.T) {
	st := open(t, t.TempDir(), &store.Options{MaxEventsPerSession: 3})
	j := journal(t, st, "s")
	for seq := uint64(1); seq <= 5; seq++ {
		appendAll(t, j, ev(seq, "a"))
	}
	got := load(t, st, "s")
	if !slices.Equal(seqs(got), []uint64{3, 4, 5}) {
		t.Fatalf("kept seqs %v, want [3 4 5]", seqs(got))
	}
	r, err := session.Restore("s", got, &session.Options{Journal: journal(t, st, "s")}, nil)
	if err != nil {
		t.Fatalf("restore from seq 3: %v", err)
	}
	if r.LastSeq() != 5 {
		t.Fatalf("restored LastSeq = %d", r.LastSeq())
	}
	if err := r.Register(session.Client, clientCap("ui.x", false)); err != nil {
		t.Fatal(err)
	}
	if got := seqs(load(t, st, "s")); !slices.Equal(got, []uint64{4, 5, 6}) {
		t.Fatalf("after one more event: %v, want [4 5 6]", got)
	}
}

func TestLoadRefusesUndecodableEvent(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	appendAll(t, journal(t, st, "s"), ev(1, "a"))
	if _, err := store.PublishRaw(ctx(t), st, "s", []byte(`{"v":2,"seq":2,"msg":{"type":"no_such_type"}}`)); err != nil {
		t.Fatal(err)
	}
	_, err := st.Load(ctx(t), "s")
	var de *protocol.DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "stream sequence 2") {
		t.Fatalf("Load = %v, want a decode error naming stream sequence 2", err)
	}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name string
		opts *store.Options
	}{
		{"nil options", nil},
		{"no data directory", &store.Options{}},
		{"negative retention", &store.Options{DataDir: t.TempDir(), MaxEventsPerSession: -1}},
		{"too many replicas", &store.Options{URL: "nats://127.0.0.1:1", Replicas: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if st, err := store.Open(ctx(t), tt.opts); err == nil {
				st.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
	t.Run("data directory in use", func(t *testing.T) {
		dir := t.TempDir()
		st := open(t, dir, nil)
		if st2, err := store.Open(ctx(t), &store.Options{DataDir: dir}); !errors.Is(err, store.ErrLocked) {
			if err == nil {
				st2.Close()
			}
			t.Fatalf("second Open = %v, want ErrLocked", err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		open(t, dir, nil)
	})
}

// TestAppendRetries: an append that failed is published again before the
// next event, whether or not the failed one was stored.
func TestAppendRetries(t *testing.T) {
	tests := []struct {
		name   string
		landed bool
	}{
		{"publish lost", false},
		{"acknowledgement lost", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := open(t, t.TempDir(), nil)
			j := journal(t, st, "s")
			appendAll(t, j, ev(1, "a"))
			store.FailNextPublish(st, tt.landed)
			if err := j.Append(ev(2, "a")); !errors.Is(err, store.ErrInjected) {
				t.Fatalf("failed append: %v", err)
			}
			appendAll(t, j, ev(3, "a"), ev(4, "a"))
			got := load(t, st, "s")
			if !slices.Equal(seqs(got), []uint64{1, 2, 3, 4}) {
				t.Fatalf("stored seqs %v, want [1 2 3 4]", seqs(got))
			}
		})
	}
}

// TestLogger: the embedded server logs through the store's slog logger,
// its start banner at debug: at info, a start and a stop log nothing.
func TestLogger(t *testing.T) {
	tests := []struct {
		name   string
		level  slog.Level
		banner bool
	}{
		{"info", slog.LevelInfo, false},
		{"debug", slog.LevelDebug, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var buf strings.Builder
			h := slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: tt.level})
			st := open(t, t.TempDir(), &store.Options{Logger: slog.New(h)})
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			out := buf.String()
			if tt.banner {
				if !strings.Contains(out, "component=nats") || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "Starting nats-server") {
					t.Fatalf("server log at debug:\n%s", out)
				}
				return
			}
			if out != "" {
				t.Fatalf("a start and stop logged at info:\n%s", out)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRetentionLowered: a lower MaxEventsPerSession trims stored sessions
// when the store opens.
func TestRetentionLowered(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	j := journal(t, st, "s")
	for seq := uint64(1); seq <= 5; seq++ {
		appendAll(t, j, ev(seq, "a"))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, &store.Options{MaxEventsPerSession: 2})
	if got := seqs(load(t, st, "s")); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("kept seqs %v, want [4 5]", got)
	}
}

// TestTooLargeEventLeavesTheJournal: an event over MaxEventBytes is
// refused with a *session.EventTooLargeError before anything is stored,
// and the journal goes on: the next append may carry the same seq, and a
// load holds exactly the events stored (a too-large event used to break
// the journal for good).
func TestTooLargeEventLeavesTheJournal(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	if st.MaxEventBytes() <= 0 || st.MaxEventBytes() > protocol.MaxFrameBytes {
		t.Fatalf("MaxEventBytes = %d", st.MaxEventBytes())
	}
	j := journal(t, st, "s")
	appendAll(t, j, ev(1, "a"))
	huge := session.Event{Seq: 2, Msg: &protocol.CapabilityOutcome{CallID: "c", Name: "n",
		Outcome: protocol.OK(json.RawMessage(`"` + strings.Repeat("x", st.MaxEventBytes()) + `"`))}}
	var tl *session.EventTooLargeError
	if err := j.Append(huge); !errors.As(err, &tl) || tl.Limit != st.MaxEventBytes() || tl.Size <= tl.Limit {
		t.Fatalf("append of a too large event: %v, want an EventTooLargeError", err)
	}
	appendAll(t, j, ev(2, "a"), ev(3, "a"))
	if got := load(t, st, "s"); !slices.Equal(seqs(got), []uint64{1, 2, 3}) {
		t.Fatalf("stored seqs %v, want [1 2 3]", seqs(got))
	}
}

// TestEmbeddedHealth: the embedded server has no elections and no
// quorum; its store is ok until it closes.
func TestEmbeddedHealth(t *testing.T) {
	st, err := store.Open(context.Background(), &store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if h := st.Health(); h.State != store.HealthOK || !h.Ready || h.Message != "" {
		t.Fatalf("health = %+v", h)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if h := st.Health(); h.State != store.HealthClosed || h.Ready {
		t.Fatalf("health after close = %+v", h)
	}
}
