package server

import (
	"context"
	"errors"
	"testing"

	"github.com/brainrt/brain/store"
)

// TestListCursorOpensOnEveryNode: a short page's cursor sealed by one
// node opens on another node of the same store (a page read through a
// load balancer goes on through whichever node it reaches), and not on
// a node of another store, nor on a process without a store, which
// seals with a key of its own, nor for another tenant.
func TestListCursorOpensOnEveryNode(t *testing.T) {
	ctx := context.Background()
	openStore := func() *store.Store {
		st, err := store.Open(ctx, &store.Options{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	st, elsewhere := openStore(), openStore()
	var one, two, three, memOnly cursorSeal
	c, err := one.seal(ctx, st, "secret-customer-7", "tenant:acme")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := two.open(ctx, st, c, "tenant:acme"); err != nil || id != "secret-customer-7" {
		t.Fatalf("another node of the store opened %q as %q, %v", c, id, err)
	}
	if id, err := two.open(ctx, st, c, "tenant:globex"); !errors.Is(err, errCursor) {
		t.Fatalf("another tenant opened %q as %q, %v; want errCursor", c, id, err)
	}
	if id, err := three.open(ctx, elsewhere, c, "tenant:acme"); !errors.Is(err, errCursor) {
		t.Fatalf("a node of another store opened %q as %q, %v; want errCursor", c, id, err)
	}
	if id, err := memOnly.open(ctx, nil, c, "tenant:acme"); !errors.Is(err, errCursor) {
		t.Fatalf("a process without a store opened %q as %q, %v; want errCursor", c, id, err)
	}
	m, err := memOnly.seal(ctx, nil, "s1", "")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := memOnly.open(ctx, nil, m, ""); err != nil || id != "s1" {
		t.Fatalf("its own cursor: %q, %v", id, err)
	}
	// A plain id is a cursor as it is; what is neither is refused.
	for cursor, want := range map[string]error{"": nil, "s-1_x": nil, "a.b": errCursor, "c1.": errCursor, "c1.%%": errCursor} {
		if _, err := one.open(ctx, st, cursor, ""); !errors.Is(err, want) {
			t.Errorf("open(%q) = %v, want %v", cursor, err, want)
		}
	}
}
