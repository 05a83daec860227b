package store_test

import (
	"fmt"
	"testing"

	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// readBack reads the events after seq after through seq through back
// from j.
func readBack(t *testing.T, j session.Journal, after, through uint64) []session.Event {
	t.Helper()
	r, ok := j.(session.EventReader)
	if !ok {
		t.Fatalf("a %T does not read back events", j)
	}
	events, err := r.ReadEvents(ctx(t), after, through)
	if err != nil {
		t.Fatalf("read back %d..%d: %v", after+1, through, err)
	}
	return events
}

// wantRange checks that events are exactly those of session id with
// after < seq <= through (made by ev).
func wantRange(t *testing.T, what, id string, events []session.Event, after, through uint64) {
	t.Helper()
	if uint64(len(events)) != through-after {
		t.Fatalf("%s: %d events read back, want %d (%d..%d)", what, len(events), through-after, after+1, through)
	}
	for i, e := range events {
		seq := after + 1 + uint64(i)
		if e.Seq != seq || writer(e) != fmt.Sprintf("%s.%d", id, seq) {
			t.Fatalf("%s: event %d is seq %d by %s, want seq %d by %s.%d", what, i, e.Seq, writer(e), seq, id, seq)
		}
	}
}

// TestJournalReadsBackEvents: a journal reads back any range of the
// events it stored, whoever else appended between them, from where its
// anchors say (a journal made afresh, with none, reads from the first);
// through direct gets and through a consumer alike.
func TestJournalReadsBackEvents(t *testing.T) {
	for _, consumers := range []bool{false, true} {
		t.Run(fmt.Sprintf("consumers=%v", consumers), func(t *testing.T) {
			st := open(t, t.TempDir(), nil)
			store.SetLoadLimits(st, 50, 0) // several batches a read
			if consumers {
				store.LoadThroughConsumers(st)
			}
			j, other := journal(t, st, "s1"), journal(t, st, "s2")
			for seq := uint64(1); seq <= 700; seq++ {
				appendAll(t, j, ev(seq, "s1"))
				if seq%3 == 0 {
					appendAll(t, other, ev(seq/3, "s2"))
				}
			}
			for _, r := range [][2]uint64{{0, 700}, {0, 1}, {99, 650}, {255, 257}, {600, 700}, {699, 700}} {
				wantRange(t, fmt.Sprintf("read %d..%d", r[0]+1, r[1]), "s1", readBack(t, j, r[0], r[1]), r[0], r[1])
			}
			fresh := journal(t, st, "s1") // no anchors: a session woken after a restart
			wantRange(t, "afresh", "s1", readBack(t, fresh, 599, 650), 599, 650)
			wantRange(t, "afresh, again", "s1", readBack(t, fresh, 599, 650), 599, 650)
			if got := readBack(t, j, 650, 800); len(got) != 50 {
				t.Errorf("read 651..800 of 700: %d events, want the 50 stored", len(got))
			}
			if got := readBack(t, j, 5, 5); len(got) != 0 {
				t.Errorf("an empty range: %d events", len(got))
			}
			if got := readBack(t, journal(t, st, "never"), 0, 10); len(got) != 0 {
				t.Errorf("a session never stored: %d events", len(got))
			}
		})
	}
}

// TestReadBackStartsAtAnAnchor: a journal's read starts at most one
// anchor's distance (256 events) before the first event asked for, not
// at the session's first: it reads what the direct gets' batches bring.
func TestReadBackStartsAtAnAnchor(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	store.SetLoadLimits(st, 50, 0)
	j := journal(t, st, "s1")
	for seq := uint64(1); seq <= 2000; seq++ {
		appendAll(t, j, ev(seq, "s1"))
	}
	batches := 0
	store.BetweenBatches(st, func() { batches++ })
	wantRange(t, "anchored", "s1", readBack(t, j, 1900, 1950), 1900, 1950)
	// From the anchor at 1792: 159 events to reach 1950, four batches of
	// 50 (three between them); from the first event, 39 batches.
	if batches > 3 {
		t.Errorf("the read went through %d batches, want at most 4 (it started before the anchor)", batches+1)
	}
	fresh := journal(t, st, "s1")
	batches = 0
	wantRange(t, "afresh", "s1", readBack(t, fresh, 1900, 1950), 1900, 1950)
	if batches < 30 {
		t.Errorf("a journal without anchors went through %d batches, want the whole log's", batches+1)
	}
	batches = 0
	wantRange(t, "afresh, again", "s1", readBack(t, fresh, 1900, 1950), 1900, 1950)
	if batches > 1 {
		t.Errorf("read again, %d batches: the first read's batches left no anchor", batches+1)
	}
}
