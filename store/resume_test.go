package store_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/brainrt/brain/store"
)

// TestResume: Resume returns what Load does and a journal that continues
// exactly those events, and is refused once another journal wrote after
// them (TestResumeAfterAppendsSinceItsLoad: after its load).
func TestResume(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	appendAll(t, journal(t, st, "s"), ev(1, "a"), ev(2, "a"), ev(3, "a"))

	events, j, err := st.Resume(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := writers(events); !slices.Equal(got, []string{"a.1", "a.2", "a.3"}) {
		t.Fatalf("resumed %v", got)
	}
	if err := j.Append(ev(3, "b")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append of a loaded seq: %v, want ErrConflict", err)
	}
	appendAll(t, j, ev(4, "b"), ev(5, "b"))

	// Another journal resumes and writes; the first one is refused.
	_, k, err := st.Resume(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, k, ev(6, "c"))
	if err := j.Append(ev(6, "b")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the older journal's append: %v, want ErrConflict", err)
	}
	if got := writers(load(t, st, "s")); !slices.Equal(got, []string{"a.1", "a.2", "a.3", "b.4", "b.5", "c.6"}) {
		t.Fatalf("stored %v", got)
	}

	// A session never stored: no events, and a journal that may start
	// anywhere.
	events, n, err := st.Resume(ctx(t), "new")
	if err != nil || len(events) != 0 {
		t.Fatalf("a new session resumed %d events, %v", len(events), err)
	}
	appendAll(t, n, ev(1, "n"))
	if got := writers(load(t, st, "new")); !slices.Equal(got, []string{"n.1"}) {
		t.Fatalf("stored %v", got)
	}
}

// TestResumeAfterAppendsSinceItsLoad: a journal resumed from a load that
// another journal's append then outran is refused on its first append,
// and the events stay the other journal's.
func TestResumeAfterAppendsSinceItsLoad(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	a := journal(t, st, "s")
	appendAll(t, a, ev(1, "a"))
	_, b, err := st.Resume(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, a, ev(2, "a")) // after b's load
	if err := b.Append(ev(2, "b")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append after another journal's: %v, want ErrConflict", err)
	}
	if got := writers(load(t, st, "s")); !slices.Equal(got, []string{"a.1", "a.2"}) {
		t.Fatalf("stored %v", got)
	}
}

// TestResumeAfterARestart: after a restart no fence knows the session,
// so the resumed journal's first append is checked by the server against
// the last event the load read — and passes.
func TestResumeAfterARestart(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	appendAll(t, journal(t, st, "s"), ev(1, "a"), ev(2, "a"))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, nil)
	events, j, err := st.Resume(ctx(t), "s")
	if err != nil || len(events) != 2 {
		t.Fatalf("resumed %d events, %v", len(events), err)
	}
	appendAll(t, j, ev(3, "b"), ev(4, "b"))
	if got := writers(load(t, st, "s")); !slices.Equal(got, []string{"a.1", "a.2", "b.3", "b.4"}) {
		t.Fatalf("stored %v", got)
	}
}
