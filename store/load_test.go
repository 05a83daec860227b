package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// eachLoad runs f on a fresh embedded store whose loads use batched
// direct gets, and on one whose loads read through a consumer (as a
// replicated store's do), each with its batches limited as asked.
func eachLoad(t *testing.T, batch, maxBytes int, f func(t *testing.T, st *store.Store, direct bool)) {
	for _, direct := range []bool{true, false} {
		name := map[bool]string{true: "direct", false: "consumer"}[direct]
		t.Run(name, func(t *testing.T) {
			st := open(t, t.TempDir(), nil)
			if !store.LoadsDirect(st) {
				t.Fatal("the embedded store does not load with direct gets")
			}
			if !direct {
				store.LoadThroughConsumers(st)
			}
			store.SetLoadLimits(st, batch, maxBytes)
			f(t, st, direct)
		})
	}
}

// writeInterleaved journals n events to session id, each followed by one
// to another session, so that the session's stream sequences are not
// contiguous.
func writeInterleaved(t *testing.T, st *store.Store, id string, n int) []session.Event {
	t.Helper()
	j, other := journal(t, st, id), journal(t, st, id+"-other")
	var events []session.Event
	for seq := uint64(1); seq <= uint64(n); seq++ {
		e := ev(seq, id)
		appendAll(t, j, e)
		appendAll(t, other, ev(seq, "other"))
		events = append(events, e)
	}
	return events
}

// TestLoadBatches: a session loads whole and in seq order whatever its
// length against the batch, split by count or by bytes; a direct load
// takes as many batches as the limits make.
func TestLoadBatches(t *testing.T) {
	small := len(frames(t, []session.Event{ev(1, "s")})[0])
	for _, tt := range []struct {
		name            string
		events, batch   int
		maxBytes        int
		directBatches   int // 0: not checked
		atLeastBatches  int
		skipConsumerRun bool
	}{
		{name: "one event", events: 1, batch: 4, directBatches: 1},
		{name: "less than a batch", events: 3, batch: 4, directBatches: 1},
		{name: "exactly a batch", events: 4, batch: 4, directBatches: 1},
		{name: "a batch and one", events: 5, batch: 4, directBatches: 2},
		{name: "exactly three batches", events: 12, batch: 4, directBatches: 3},
		{name: "three batches and some", events: 14, batch: 4, directBatches: 4},
		{name: "split by bytes", events: 12, batch: 100, maxBytes: 3 * small, atLeastBatches: 4},
		{name: "max bytes below an event", events: 3, batch: 100, maxBytes: 1, directBatches: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachLoad(t, tt.batch, tt.maxBytes, func(t *testing.T, st *store.Store, direct bool) {
				want := writeInterleaved(t, st, "s", tt.events)
				batches := 1
				store.BetweenBatches(st, func() { batches++ })
				got := load(t, st, "s")
				checkContiguous(t, got, 1)
				if !slices.Equal(frames(t, got), frames(t, want)) {
					t.Fatalf("loaded %v, want %v", got, want)
				}
				if !direct {
					return
				}
				if tt.directBatches > 0 && batches != tt.directBatches {
					t.Errorf("%d batches, want %d", batches, tt.directBatches)
				}
				if batches < tt.atLeastBatches {
					t.Errorf("%d batches, want at least %d", batches, tt.atLeastBatches)
				}
			})
		})
	}
}

// bigEvent is an event whose frame is exactly size bytes.
func bigEvent(t *testing.T, seq uint64, size int) session.Event {
	t.Helper()
	mk := func(pad int) session.Event {
		return session.Event{Seq: seq, Msg: &protocol.CapabilityInvoked{CallID: fmt.Sprint("c", seq), Name: "fs.write", InvokedBy: "agent",
			Input: json.RawMessage(`{"text":"` + strings.Repeat("x", pad) + `"}`)}}
	}
	base := len(frames(t, []session.Event{mk(0)})[0])
	e := mk(size - base)
	if n := len(frames(t, []session.Event{e})[0]); n != size {
		t.Fatalf("event of %d bytes, want %d", n, size)
	}
	return e
}

// TestLoadLargeEvents: events of nearly the largest size a journal
// stores load whole; a direct load's batches are split by their bytes
// (at the store's own limits: two such events a batch).
func TestLoadLargeEvents(t *testing.T) {
	eachLoad(t, 0, 0, func(t *testing.T, st *store.Store, direct bool) {
		j := journal(t, st, "big")
		var want []session.Event
		for seq := uint64(1); seq <= 5; seq++ {
			e := bigEvent(t, seq, st.MaxEventBytes()-int(seq))
			appendAll(t, j, e)
			want = append(want, e)
		}
		batches := 1
		store.BetweenBatches(st, func() { batches++ })
		got := load(t, st, "big")
		checkContiguous(t, got, 1)
		if !slices.Equal(frames(t, got), frames(t, want)) {
			t.Fatal("the large events loaded differ from those stored")
		}
		if direct && batches != 3 {
			t.Errorf("%d batches of 5 events of about %d bytes, want 3 (2 MiB a batch)", batches, st.MaxEventBytes())
		}
	})
}

// TestLoadUndecodable: an event that does not decode, in a later batch,
// is an error naming its stream sequence.
func TestLoadUndecodable(t *testing.T) {
	for _, pos := range []int{1, 4, 5, 6} { // the first event of a batch, and others
		t.Run(fmt.Sprint("event ", pos), func(t *testing.T) {
			eachLoad(t, 4, 0, func(t *testing.T, st *store.Store, _ bool) {
				writeInterleaved(t, st, "s", pos-1)
				seq, err := store.PublishRaw(ctx(t), st, "s", []byte(fmt.Sprintf(`{"v":2,"seq":%d,"msg":{"type":"no_such_type"}}`, pos)))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := store.PublishRaw(ctx(t), st, "s", []byte(frames(t, []session.Event{ev(uint64(pos+1), "s")})[0])); err != nil {
					t.Fatal(err)
				}
				_, err = st.Load(ctx(t), "s")
				var de *protocol.DecodeError
				if !errors.As(err, &de) || !strings.Contains(err.Error(), fmt.Sprintf("stream sequence %d:", seq)) {
					t.Fatalf("Load = %v, want a decode error naming stream sequence %d", err, seq)
				}
				// The store still loads other sessions.
				if got := load(t, st, "s-other"); len(got) != pos-1 {
					t.Fatalf("the other session loads %d events, want %d", len(got), pos-1)
				}
			})
		})
	}
}

// TestLoadEmpty: a session never stored, and one deleted, load as no
// events.
func TestLoadEmpty(t *testing.T) {
	eachLoad(t, 0, 0, func(t *testing.T, st *store.Store, _ bool) {
		writeInterleaved(t, st, "gone", 3)
		if err := st.Delete(ctx(t), "gone"); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"never", "gone"} {
			got, err := st.Load(ctx(t), id)
			if err != nil || len(got) != 0 {
				t.Fatalf("Load(%q) = %v, %v; want no events", id, seqs(got), err)
			}
		}
	})
}

// TestLoadDeletedWhileLoading: a session deleted between a direct
// load's batches is an error, not the events read so far. (A consumer's
// load waits for the missing events until its request's bound.)
func TestLoadDeletedWhileLoading(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	store.SetLoadLimits(st, 2, 0)
	writeInterleaved(t, st, "s", 5)
	store.BetweenBatches(st, func() {
		store.BetweenBatches(st, nil)
		if err := st.Delete(ctx(t), "s"); err != nil {
			t.Error(err)
		}
	})
	got, err := st.Load(ctx(t), "s")
	if err == nil || !strings.Contains(err.Error(), "deleted while it loaded, or the store lost them") {
		t.Fatalf("Load = %v, %v; want an error saying the session was deleted while loading", seqs(got), err)
	}
	if got := load(t, st, "s"); len(got) != 0 {
		t.Fatalf("after the delete: %v", seqs(got))
	}
}

// TestLoadCancelled: a cancelled context ends a load, before it starts or
// between its batches, with context.Canceled; the next load is whole.
func TestLoadCancelled(t *testing.T) {
	eachLoad(t, 2, 0, func(t *testing.T, st *store.Store, _ bool) {
		writeInterleaved(t, st, "s", 5)
		c, cancel := context.WithCancel(context.Background())
		cancel()
		if got, err := st.Load(c, "s"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Load with a cancelled context = %v, %v; want context.Canceled", seqs(got), err)
		}
		c, cancel = context.WithCancel(context.Background())
		defer cancel()
		store.BetweenBatches(st, cancel)
		if got, err := st.Load(c, "s"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Load cancelled between batches = %v, %v; want context.Canceled", seqs(got), err)
		}
		store.BetweenBatches(st, nil)
		for range 3 { // a slot of a cancelled load is not reused
			checkContiguous(t, load(t, st, "s"), 1)
		}
		if got := load(t, st, "s"); len(got) != 5 {
			t.Fatalf("loaded %d events, want 5", len(got))
		}
	})
}
