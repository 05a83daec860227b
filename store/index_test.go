package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/brainrt/brain/store"
)

// pageAll lists every stored session by pages of limit.
func pageAll(t *testing.T, st *store.Store, limit int) []string {
	t.Helper()
	var all []string
	after := ""
	for range 10_000 { // bounded: a list that never ends fails below
		ids, more, err := st.SessionsPage(ctx(t), after, limit)
		if err != nil {
			t.Fatalf("SessionsPage(%q, %d): %v", after, limit, err)
		}
		if len(ids) > limit || (more && len(ids) != limit) {
			t.Fatalf("SessionsPage(%q, %d) = %d ids, more %v", after, limit, len(ids), more)
		}
		all = append(all, ids...)
		if !more {
			return all
		}
		after = ids[len(ids)-1]
	}
	t.Fatal("the pages never end")
	return nil
}

// TestSessionsPage: pages list every stored session once, in id order;
// what is appended and deleted after the first page (which reads the
// stream) shows in the next ones; a store opened again reads the same
// list from the stream; a bad limit is refused.
func TestSessionsPage(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	var want []string
	for i := range 23 {
		id := fmt.Sprintf("s%03d", (i*7)%23) // stored out of order
		appendAll(t, journal(t, st, id), ev(1, id))
		want = append(want, id)
	}
	slices.Sort(want)
	if got := pageAll(t, st, 5); !slices.Equal(got, want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}
	if n, err := st.SessionCount(ctx(t)); err != nil || n != len(want) {
		t.Fatalf("SessionCount = %d, %v; want %d", n, err, len(want))
	}
	// Loaded: appends and deletes keep it current.
	for _, id := range []string{"a-first", "s010x", "z-last"} {
		appendAll(t, journal(t, st, id), ev(1, id))
		want = append(want, id)
	}
	for _, id := range []string{"s000", "s011", "a-first"} {
		if err := st.Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
		want = slices.DeleteFunc(want, func(s string) bool { return s == id })
	}
	// A deleted session stored again is listed again.
	appendAll(t, journal(t, st, "s011"), ev(1, "s011"))
	want = append(want, "s011")
	slices.Sort(want)
	for _, limit := range []int{1, 4, 100} {
		if got := pageAll(t, st, limit); !slices.Equal(got, want) {
			t.Fatalf("pages of %d = %v, want %v", limit, got, want)
		}
	}
	if ids, more, err := st.SessionsPage(ctx(t), "s019", 2); err != nil || !slices.Equal(ids, []string{"s020", "s021"}) || !more {
		t.Fatalf(`SessionsPage("s019", 2) = %v, %v, %v`, ids, more, err)
	}
	if ids, more, err := st.SessionsPage(ctx(t), "zz", 2); err != nil || len(ids) != 0 || more {
		t.Fatalf(`SessionsPage("zz", 2) = %v, %v, %v`, ids, more, err)
	}
	if _, _, err := st.SessionsPage(ctx(t), "", 0); err == nil {
		t.Fatal("SessionsPage with limit 0: no error")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := open(t, dir, nil)
	if got := pageAll(t, st2, 3); !slices.Equal(got, want) {
		t.Fatalf("after a restart: pages = %v, want %v", got, want)
	}
}
