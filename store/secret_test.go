package store_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/brainrt/brain/store"
)

// TestSecret: the store's secret is made once — concurrent first askers
// all get the one that won the create — kept across a reopen, is no
// session (SessionOwners does not list it), and another store has
// another.
func TestSecret(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen [][]byte
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := st.Secret(ctx(t))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != 8 || len(seen[0]) != store.SecretBytes || bytes.Equal(seen[0], make([]byte, store.SecretBytes)) {
		t.Fatalf("secrets %x", seen)
	}
	for _, s := range seen[1:] {
		if !bytes.Equal(s, seen[0]) {
			t.Fatalf("concurrent askers got %x and %x", seen[0], s)
		}
	}
	if owners, err := st.SessionOwners(ctx(t)); err != nil || len(owners) != 0 {
		t.Fatalf("SessionOwners = %v, %v; the secret is no session", owners, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := open(t, dir, nil).Secret(ctx(t))
	if err != nil || !bytes.Equal(again, seen[0]) {
		t.Fatalf("after a reopen: %x, %v; want %x", again, err, seen[0])
	}
	other, err := open(t, t.TempDir(), nil).Secret(ctx(t))
	if err != nil || bytes.Equal(other, seen[0]) {
		t.Fatalf("another store's secret: %x, %v", other, err)
	}
}
