package store_test

import (
	"maps"
	"testing"
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
