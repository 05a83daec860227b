package store_test

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// TestEmbeddedAppendsArePlain: on the embedded server a journal's first
// append is checked by the server (its headers), and the appends that
// follow it, which nobody else can have written between, carry none —
// and still never interleave with another journal's.
func TestEmbeddedAppendsArePlain(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	a := journal(t, st, "s")
	appendAll(t, a, ev(1, "a"))
	h, err := store.LastHeader(ctx(t), st, "s")
	if err != nil {
		t.Fatal(err)
	}
	if h.Get(jetstream.ExpectedLastSubjSeqHeader) != "0" || h.Get("Brain-Journal") == "" {
		t.Fatalf("first append's headers %v, want the expected sequence 0 and the journal's token", h)
	}
	appendAll(t, a, ev(2, "a"))
	if h, err := store.LastHeader(ctx(t), st, "s"); err != nil || !plain(h) {
		t.Fatalf("second append's headers %v (%v), want none of the journal's", h, err)
	}

	// A journal made now continues plain; the older one is refused.
	b := journal(t, st, "s")
	appendAll(t, b, ev(3, "b"))
	if h, err := store.LastHeader(ctx(t), st, "s"); err != nil || !plain(h) {
		t.Fatalf("the newer journal's append: headers %v (%v), want none of the journal's", h, err)
	}
	if err := a.Append(ev(3, "a")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the older journal's append: %v, want ErrConflict", err)
	}
	appendAll(t, b, ev(4, "b"))
	if got := writers(load(t, st, "s")); !slices.Equal(got, []string{"a.1", "a.2", "b.3", "b.4"}) {
		t.Fatalf("stored %v", got)
	}
}

// TestPlainAppendLostThenTakenOver: a plain append that is stored but
// unanswered, whose checked attempts then fail, leaves its journal
// unsure; a newer journal that wrote after it wins, and the unsure one is
// refused. (TestAppendRetries has the unsure journal find its own plain
// event; TestAppendMeetsItsOwnAttemptInProcess, the rest of its timeout.)
func TestPlainAppendLostThenTakenOver(t *testing.T) {
	st := open(t, t.TempDir(), &store.Options{Timeout: time.Second})
	a := journal(t, st, "s")
	appendAll(t, a, ev(1, "a"), ev(2, "a"))
	// Append 3: its plain publish is stored and unanswered, and every
	// checked attempt after it fails.
	const refused = `{"type":"io.nats.jetstream.api.v1.pub_ack_response","error":{"code":500,"err_code":10999,"description":"injected"}}`
	store.AnswerAttempts(st, store.Lost, refused)
	if err := a.Append(ev(3, "a")); err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("append 3: %v, want a failure to retry", err)
	}
	b := journal(t, st, "s") // reads a's event 3 as the last
	appendAll(t, b, ev(4, "b"))
	if err := a.Append(ev(4, "a")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the unsure journal's next append: %v, want ErrConflict", err)
	}
	if got := writers(load(t, st, "s")); !slices.Equal(got, []string{"a.1", "a.2", "a.3", "b.4"}) {
		t.Fatalf("stored %v", got)
	}
}

// TestFencesFollowJournals: the store keeps a session's fence while a
// journal of it lives, and none for a session nobody holds.
func TestFencesFollowJournals(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	for _, id := range []string{"a", "b", "c"} {
		appendAll(t, journal(t, st, id), ev(1, id), ev(2, id))
	}
	kept := journal(t, st, "d")
	appendAll(t, kept, ev(1, "d"))
	// The fences of a, b and c go with their journals, once the
	// collector has run their cleanups (on a goroutine of its own).
	deadline := time.Now().Add(10 * time.Second)
	for store.Fences(st) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d fences kept, want 1 (the live journal's)", store.Fences(st))
		}
		runtime.GC()
		runtime.Gosched()
	}
	appendAll(t, kept, ev(2, "d"))
	if got := writers(load(t, st, "d")); !slices.Equal(got, []string{"d.1", "d.2"}) {
		t.Fatalf("stored %v", got)
	}
}

// plain reports whether a stored message's headers are only those a
// direct get adds (Nats-Stream, Nats-Sequence, …): the journal set none.
func plain(h nats.Header) bool {
	for k := range h {
		if k != "Nats-Stream" && k != "Nats-Sequence" && k != "Nats-Subject" && k != "Nats-Time-Stamp" {
			return false
		}
	}
	return true
}

// writers lists who wrote each event.
func writers(events []session.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = writer(e)
	}
	return out
}
