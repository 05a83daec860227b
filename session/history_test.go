package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// historyJournal is a memJournal that reads back what it stored
// (session.EventReader), and can be told to fail or to lose an event.
type historyJournal struct {
	memJournal
	reads atomic.Int64
	fail  atomic.Bool   // ReadEvents fails
	lose  atomic.Uint64 // ReadEvents leaves this seq out (0: none)
}

func (j *historyJournal) ReadEvents(_ context.Context, after, through uint64) ([]session.Event, error) {
	j.reads.Add(1)
	if j.fail.Load() {
		return nil, errors.New("the store is down")
	}
	all, err := j.decoded()
	if err != nil {
		return nil, err
	}
	var out []session.Event
	for _, e := range all {
		if e.Seq > after && e.Seq <= through && e.Seq != j.lose.Load() {
			out = append(out, e)
		}
	}
	return out, nil
}

// historySession is a session journaling to a historyJournal, keeping
// keep events in memory of a replay window of size, with an echo agent
// capability; it has made calls calls (two events each, after its
// registration's one).
func historySession(t testing.TB, size, keep, calls int, logs *logRecorder) (*session.Session, *historyJournal) {
	return historySessionWith(t, &session.Options{LogSize: size, LogMemory: keep}, calls, logs)
}

// historySessionWith is historySession with options opts (its Journal
// and History set here).
func historySessionWith(t testing.TB, opts *session.Options, calls int, logs *logRecorder) (*session.Session, *historyJournal) {
	t.Helper()
	j := &historyJournal{}
	opts.Journal, opts.History = j, j
	if logs != nil {
		opts.Logger = slog.New(logs)
	}
	s := session.New("h1", opts)
	if err := s.RegisterAgent(agentCap("echo"), session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, i))); !out.IsOK() {
			t.Fatal(out.Err)
		}
	}
	return s, j
}

// firstEvent returns the first event a subscription after seq after
// delivers.
func firstEvent(t *testing.T, s *session.Session, after uint64, snapshotWhenBehind bool) session.Event {
	t.Helper()
	sub := s.Subscribe(after)
	defer sub.Close()
	if snapshotWhenBehind {
		sub.SnapshotWhenBehind()
	}
	ev, err := sub.Next(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestSubscriberReadsBackFromHistory: with a History, a session keeps
// only its latest LogMemory events, and a subscriber behind them gets
// every event it missed, in order, the older ones read back from the
// journal — the same messages it would have got from memory.
func TestSubscriberReadsBackFromHistory(t *testing.T) {
	s, j := historySession(t, 1000, 4, 40, nil) // 81 events
	want := j.events(t)
	for _, after := range []uint64{0, 1, 40, 76, 77, 80} {
		got := eventsAfter(t, s, after) // fails on a snapshot
		if len(got) != len(want)-int(after) {
			t.Fatalf("after %d: %d events, want %d", after, len(got), len(want)-int(after))
		}
		for i, ev := range got {
			if w := want[int(after)+i]; ev.Seq != w.Seq || jsonOf(t, ev.Msg) != jsonOf(t, w.Msg) {
				t.Fatalf("after %d: event %d is seq %d %s, want seq %d %s", after, i, ev.Seq, jsonOf(t, ev.Msg), w.Seq, jsonOf(t, w.Msg))
			}
		}
	}
	if j.reads.Load() != 4 { // after 0, 1, 40 and 76; not 77 (the 4 in memory are 78-81) or 80
		t.Errorf("%d reads back, want 4", j.reads.Load())
	}
}

// TestSubscriberBehindHistoryGetsSnapshot: what the replay window does
// not cover, what cannot be read back, and a subscriber that asked for
// it get a snapshot, as a subscriber past the log always has; a failed or
// short read is logged.
func TestSubscriberBehindHistoryGetsSnapshot(t *testing.T) {
	logs := &logRecorder{}
	s, j := historySession(t, 50, 4, 40, logs) // 81 events; 32..81 replayed, 78..81 in memory
	isSnapshot := func(ev session.Event) bool { _, ok := ev.Msg.(*protocol.Snapshot); return ok }
	if ev := firstEvent(t, s, 10, false); !isSnapshot(ev) {
		t.Errorf("behind the replay window: got seq %d %s, want a snapshot", ev.Seq, ev.Msg.MessageType())
	}
	if ev := firstEvent(t, s, 40, false); isSnapshot(ev) || ev.Seq != 41 {
		t.Errorf("within the replay window: got seq %d %s, want seq 41", ev.Seq, ev.Msg.MessageType())
	}
	if ev := firstEvent(t, s, 40, true); !isSnapshot(ev) || ev.Seq != 81 {
		t.Errorf("SnapshotWhenBehind: got seq %d %s, want a snapshot at 81", ev.Seq, ev.Msg.MessageType())
	}
	if ev := firstEvent(t, s, 77, true); isSnapshot(ev) || ev.Seq != 78 {
		t.Errorf("SnapshotWhenBehind, in memory: got seq %d %s, want seq 78", ev.Seq, ev.Msg.MessageType())
	}
	j.fail.Store(true)
	if ev := firstEvent(t, s, 40, false); !isSnapshot(ev) {
		t.Errorf("a failed read: got seq %d %s, want a snapshot", ev.Seq, ev.Msg.MessageType())
	}
	logs.wait(t, "event log: events no longer in memory could not be read back; the subscriber gets a snapshot instead", map[string]string{"after": "40", "through": "77", "error": "the store is down"})
	j.fail.Store(false)
	j.lose.Store(60)
	if ev := firstEvent(t, s, 40, false); !isSnapshot(ev) {
		t.Errorf("a read with a gap: got seq %d %s, want a snapshot", ev.Seq, ev.Msg.MessageType())
	}
	logs.wait(t, "event log: events no longer in memory could not be read back; the subscriber gets a snapshot instead", map[string]string{"error": "event 20 of 36 read back has seq 61, want 60"})
}

// TestLiveSubscriberReadsBackWhatItFellBehind: a subscriber that does
// not read while many events are emitted — a burst — gets every one of
// them in order: what left memory meanwhile is read back.
func TestLiveSubscriberReadsBackWhatItFellBehind(t *testing.T) {
	s, j := historySession(t, 1000, 4, 0, nil)
	sub := s.Subscribe(s.LastSeq())
	defer sub.Close()
	for i := range 30 {
		if out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, i))); !out.IsOK() {
			t.Fatal(out.Err)
		}
	}
	for want := uint64(2); want <= 61; want++ {
		ev, err := sub.Next(waitCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != want {
			t.Fatalf("got seq %d %s, want seq %d", ev.Seq, ev.Msg.MessageType(), want)
		}
	}
	if j.reads.Load() == 0 {
		t.Error("nothing was read back")
	}
}

// TestHistoryUnderConcurrentAppends: subscribers reading from the start
// while events are emitted each see one gapless run of seqs (under
// -race: the read back runs without the session's lock).
func TestHistoryUnderConcurrentAppends(t *testing.T) {
	s, _ := historySession(t, 100000, 3, 0, nil)
	readersSeeEveryEvent(t, s, 300)
}

// readersSeeEveryEvent has s, which has made no call yet, make calls echo
// calls while three subscribers read from the start, and fails unless
// each sees every event, in order, without a gap.
func readersSeeEveryEvent(t *testing.T, s *session.Session, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range calls {
			if out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, i))); !out.IsOK() {
				t.Error(out.Err)
				return
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			sub := s.Subscribe(0)
			defer sub.Close()
			for want := uint64(1); want <= uint64(1+2*calls); want++ {
				ev, err := sub.Next(waitCtx(t))
				if err != nil {
					t.Error(err)
					return
				}
				if ev.Seq != want {
					t.Errorf("got seq %d %s, want seq %d", ev.Seq, ev.Msg.MessageType(), want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestHistoryBoundsSessionMemory: a journaled session that has made
// 2,048 calls (4,097 events) holds a few KiB of events with a History,
// where it held every event of its replay window — about 0.6 MiB —
// without one; and its latest 1,024 finished calls (Options.
// FinishedMemory) in 8 KiB, where they took 125 KiB in a map.
func TestHistoryBoundsSessionMemory(t *testing.T) {
	for _, c := range []struct {
		what  string
		opts  session.Options
		bound int64
	}{
		{"the events (one finished call kept)", session.Options{FinishedMemory: 1}, 16 << 10},
		{"the defaults", session.Options{}, 24 << 10},
	} {
		t.Run(c.what, func(t *testing.T) {
			if per := sessionHeap(t, c.opts); per > c.bound {
				t.Errorf("a session after 2,048 calls holds %d bytes of heap, want at most %d", per, c.bound)
			}
		})
	}
}

// sessionHeap returns the heap a journaled session with opts holds once
// it has made 2,048 calls, less its journal's.
func sessionHeap(t *testing.T, opts session.Options) int64 {
	const sessions, calls = 20, 2048
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var keep []*session.Session
	for range sessions {
		o := opts
		s, j := historySessionWith(t, &o, calls, nil) // 4,096 events replayed, 32 in memory
		keep = append(keep, s)
		// The journal's frames are the store's, not the session's.
		j.mu.Lock()
		j.frames = nil
		j.mu.Unlock()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	// Signed: the collector may free garbage from before the first sample.
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / sessions
	t.Logf("a session after %d calls: %d bytes of heap", calls, per)
	return per
}
