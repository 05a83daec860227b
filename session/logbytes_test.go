package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// bigSession is a session whose capability "big" answers each call with a
// fresh JSON string of size bytes, having made calls calls; journal and
// History are a historyJournal when history is set, none otherwise.
func bigSession(t testing.TB, opts session.Options, history bool, size, calls int) (*session.Session, *historyJournal) {
	t.Helper()
	var j *historyJournal
	if history {
		j = &historyJournal{}
		opts.Journal, opts.History = j, j
	}
	s := session.New("big", &opts)
	if err := s.RegisterAgent(agentCap("big"), session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		return json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`), nil
	})); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if out := s.Invoke(context.Background(), protocol.AudienceLLM, "big", json.RawMessage(fmt.Sprintf(`{"text":"%d"}`, i))); !out.IsOK() {
			t.Fatal(out.Err)
		}
	}
	return s, j
}

// TestLogMemoryBytesBoundsWhatEventsHold: a journaled session whose
// latest 32 events carry results of 512 KiB held them all in memory, 8
// MiB; with the default byte budget (1 MiB) it holds about the budget.
// The same measurement without a budget shows what the bound takes away,
// so that the test cannot pass by measuring nothing.
func TestLogMemoryBytesBoundsWhatEventsHold(t *testing.T) {
	const size, calls = 512 << 10, 40 // 81 events; the latest 32 hold 16 results
	heapOf := func(opts session.Options) int64 {
		// A goroutine a call: a session's own pool of handlers would keep
		// it, and its results, alive for a while after it is dropped —
		// into the next measurement.
		opts.Go = func(f func()) { go f() }
		const sessions = 4
		// Twice: what a sync.Pool held at the first collection (the
		// journal's encoding buffers, of results this size) is freed by
		// the second, which must not fall between the samples.
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var keep []*session.Session
		for range sessions {
			s, j := bigSession(t, opts, true, size, calls)
			keep = append(keep, s)
			j.mu.Lock()
			j.frames = nil // the journal's frames are the store's, not the session's
			j.mu.Unlock()
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / sessions
	}
	// A sample is the whole process's: what an earlier test left for a
	// while (a session's idle handlers keep it 10 s) and the collector
	// frees between the two samples makes it smaller. Such a sample says
	// nothing; it is taken again.
	var unbounded int64
	for range 3 {
		if unbounded = heapOf(session.Options{LogMemoryBytes: -1}); unbounded >= 6<<20 {
			break
		}
	}
	bounded := heapOf(session.Options{})
	t.Logf("a session whose latest events hold 16 results of %d bytes: %d bytes of heap without a byte budget, %d with the default", size, unbounded, bounded)
	if unbounded < 6<<20 {
		t.Fatalf("without a byte budget a session held %d bytes; want the 16 results, over 6 MiB (the measurement is off)", unbounded)
	}
	// The budget, and the newest event beside it: a result of 512 KiB
	// that takes the held bytes over 1 MiB stays while the older leave.
	if limit := int64(session.DefaultLogMemoryBytes + size + 256<<10); bounded > limit {
		t.Errorf("with the default byte budget a session holds %d bytes of heap, want at most %d", bounded, limit)
	}
}

// TestEventsOverTheByteBudgetAreReadBack: the events the byte budget took
// out of memory reach a subscriber behind them as they were, read back
// from the History; one within the budget reads from memory.
func TestEventsOverTheByteBudgetAreReadBack(t *testing.T) {
	const size = 20 << 10
	s, j := bigSession(t, session.Options{LogMemoryBytes: 64 << 10}, true, size, 10) // 21 events; the budget holds 3 results
	want := j.events(t)
	got := eventsAfter(t, s, 0) // fails on a snapshot
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, ev := range got {
		if w := want[i]; ev.Seq != w.Seq || jsonOf(t, ev.Msg) != jsonOf(t, w.Msg) {
			t.Fatalf("event %d is seq %d %s, want seq %d %s", i, ev.Seq, ev.Msg.MessageType(), w.Seq, w.Msg.MessageType())
		}
	}
	if j.reads.Load() != 1 {
		t.Errorf("%d reads back for a subscriber from the start, want 1", j.reads.Load())
	}
	// The latest events are in memory: the newest result, the call
	// before it, and not the 32 LogMemory would keep by count alone.
	j.reads.Store(0)
	if evs := eventsAfter(t, s, s.LastSeq()-3); len(evs) != 3 || j.reads.Load() != 0 {
		t.Errorf("the latest 3 events: %d, with %d reads back; want 3 from memory", len(evs), j.reads.Load())
	}
	if evs := eventsAfter(t, s, s.LastSeq()-12); len(evs) != 12 || j.reads.Load() != 1 {
		t.Errorf("the latest 12 events: %d, with %d reads back; want 12, the older read back once", len(evs), j.reads.Load())
	}
	// A subscriber that takes no read back gets a snapshot behind the
	// budget, as it does behind LogMemory.
	if ev := firstEvent(t, s, s.LastSeq()-12, true); ev.Msg.MessageType() != protocol.TypeSnapshot {
		t.Errorf("SnapshotWhenBehind, behind the budget: got seq %d %s, want a snapshot", ev.Seq, ev.Msg.MessageType())
	}
}

// TestNewestEventStaysWhateverItsSize: an event larger than the whole
// budget stays in memory while it is the newest, so that a live
// subscriber reads it without a read back.
func TestNewestEventStaysWhateverItsSize(t *testing.T) {
	s, j := bigSession(t, session.Options{LogMemoryBytes: 1 << 10}, true, 64<<10, 3)
	evs := eventsAfter(t, s, s.LastSeq()-1)
	if len(evs) != 1 || evs[0].Msg.MessageType() != protocol.TypeCapabilityOutcome || j.reads.Load() != 0 {
		t.Fatalf("the newest event: %d events, %d reads back; want its outcome from memory", len(evs), j.reads.Load())
	}
	if got := len(evs[0].Msg.(*protocol.CapabilityOutcome).Outcome.Value); got != 64<<10 {
		t.Errorf("the newest result has %d bytes, want %d", got, 64<<10)
	}
}

// TestLogMemoryBytesWithoutHistory: a session without a History keeps its
// whole replay window by default; given a byte budget, a subscriber
// behind it gets a snapshot, there being nothing to read back.
func TestLogMemoryBytesWithoutHistory(t *testing.T) {
	const size = 20 << 10
	s, _ := bigSession(t, session.Options{}, false, size, 10)
	if evs := eventsAfter(t, s, 0); len(evs) != 21 {
		t.Errorf("no budget: %d events replayed, want 21", len(evs))
	}
	s, _ = bigSession(t, session.Options{LogMemoryBytes: 64 << 10}, false, size, 10)
	if ev := firstEvent(t, s, 0, false); ev.Msg.MessageType() != protocol.TypeSnapshot || ev.Seq != 21 {
		t.Errorf("behind the budget: got seq %d %s, want a snapshot at 21", ev.Seq, ev.Msg.MessageType())
	}
	if evs := eventsAfter(t, s, 18); len(evs) != 3 {
		t.Errorf("within the budget: %d events, want 3", len(evs))
	}
}

// TestByteBudgetUnderConcurrentAppends: subscribers reading from the
// start while calls are made each see one gapless run of seqs, though
// the byte budget takes events out of memory as they come (under -race:
// the read back runs without the session's lock).
func TestByteBudgetUnderConcurrentAppends(t *testing.T) {
	s, _ := historySessionWith(t, &session.Options{LogSize: 100000, LogMemoryBytes: 64}, 0, nil) // 4–6 events of echo calls in memory
	readersSeeEveryEvent(t, s, 300)
}
