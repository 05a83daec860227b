package store_test

import (
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/brainrt/brain/store"
)

// TestSessionOwners: owner records survive a reopen, are replaced by a
// later record, and go with Delete; a bad session id is refused.
func TestSessionOwners(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	if got, err := st.SessionOwners(ctx(t)); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	for id, owner := range map[string]string{"a": "k1", "b": "k1", "c": "k2"} {
		if err := st.SetSessionOwner(ctx(t), id, owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetSessionOwner(ctx(t), "c", "k3"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSessionOwner(ctx(t), "bad.id", "k1"); err == nil {
		t.Error("a bad session id was accepted")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, nil)
	want := map[string]string{"a": "k1", "b": "k1", "c": "k3"}
	if got, err := st.SessionOwners(ctx(t)); err != nil || !maps.Equal(got, want) {
		t.Fatalf("after reopen: %v, %v; want %v", got, err, want)
	}
	appendAll(t, journal(t, st, "a"), ev(1, "x"))
	if err := st.Delete(ctx(t), "a"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx(t), "never"); err != nil {
		t.Errorf("deleting a session never stored: %v", err)
	}
	delete(want, "a")
	if got, err := st.SessionOwners(ctx(t)); err != nil || !maps.Equal(got, want) {
		t.Fatalf("after Delete: %v, %v; want %v", got, err, want)
	}
}

// TestSessionsOwned: each owner's sessions are counted as records are
// set, replaced (the old owner's count goes down), made tombstones (an
// owner starting with "!" is not counted) and deleted; the counts
// survive a reopen; a bucket without counts (made before them) is
// counted once from its records.
func TestSessionsOwned(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	check := func(when string, want map[string]int) {
		t.Helper()
		for owner, n := range want {
			if got, err := st.SessionsOwned(ctx(t), owner); err != nil || got != n {
				t.Errorf("%s: SessionsOwned(%q) = %d, %v; want %d", when, owner, got, err, n)
			}
		}
	}
	check("empty", map[string]int{"k1": 0, "tenant:a b": 0})
	for id, owner := range map[string]string{"a": "k1", "b": "k1", "c": "k2", "d": "tenant:a b", "e": "tenant:a b"} {
		if err := st.SetSessionOwner(ctx(t), id, owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetSessionOwner(ctx(t), "a", "k1"); err != nil { // the same record again
		t.Fatal(err)
	}
	if err := st.SetSessionOwner(ctx(t), "c", "k3"); err != nil { // moved
		t.Fatal(err)
	}
	if err := st.SetSessionOwner(ctx(t), "d", "!deleted"); err != nil { // a tombstone
		t.Fatal(err)
	}
	want := map[string]int{"k1": 2, "k2": 0, "k3": 1, "tenant:a b": 1, "!deleted": 0}
	check("after records", want)
	appendAll(t, journal(t, st, "b"), ev(1, "x"))
	if err := st.Delete(ctx(t), "b"); err != nil {
		t.Fatal(err)
	}
	want["k1"] = 1
	check("after Delete", want)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, nil)
	check("after reopen", want)
	if got, err := st.SessionOwners(ctx(t)); err != nil || len(got) != 4 {
		t.Errorf("SessionOwners lists the counts: %v, %v", got, err)
	}
	if err := store.ForgetCounts(ctx(t), st); err != nil {
		t.Fatal(err)
	}
	check("counted again from the records", want)
}

// TestSessionsOwnedConcurrently: one owner's sessions recorded many at a
// time by one process are all counted, none fails, and the process's
// updates of the count never race one another (they did, and a
// tenant's creation could fail after 100 lost tries).
func TestSessionsOwnedConcurrently(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := st.SetSessionOwner(ctx(t), fmt.Sprintf("s%d", i), "tenant"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("record an owner: %v", err)
	}
	if got, err := st.SessionsOwned(ctx(t), "tenant"); err != nil || got != n {
		t.Fatalf("SessionsOwned = %d, %v; want %d", got, err, n)
	}
	if lost := store.CountsLost(st); lost != 0 {
		t.Fatalf("%d count updates lost to this process's own", lost)
	}
}
