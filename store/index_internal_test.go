package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestIndexMerges: many additions and removals (past indexMerge, so that
// they are merged into the base list more than once) leave the index
// equal to a plain set of the same operations, page after page; what
// happens while it loads is applied after the load.
func TestIndexMerges(t *testing.T) {
	var x index
	set := map[string]bool{}
	initial := []string{}
	for i := range 1000 {
		id := fmt.Sprintf("i%05d", i*3)
		initial = append(initial, id)
		set[id] = true
	}
	x.stored("ignored: not loaded, so the load reads it")
	read := func(context.Context) ([]string, error) {
		// While the load runs: applied after it.
		x.stored("during")
		x.removed("i00000")
		return slices.Clone(initial), nil
	}
	if err := x.ready(context.Background(), 0, read); err != nil {
		t.Fatal(err)
	}
	set["during"] = true
	delete(set, "i00000")
	r := rand.New(rand.NewPCG(1, 2))
	for range 3 * indexMerge {
		id := fmt.Sprintf("i%05d", r.IntN(6000))
		if r.IntN(3) == 0 {
			x.removed(id)
			delete(set, id)
		} else {
			x.stored(id)
			set[id] = true
		}
	}
	var want []string
	for id := range set {
		want = append(want, id)
	}
	slices.Sort(want)
	var got []string
	for after, more := "", true; more; {
		var ids []string
		ids, more = x.page(after, 97)
		got = append(got, ids...)
		if len(ids) > 0 {
			after = ids[len(ids)-1]
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("index has %d ids, the set %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	if x.count() != len(want) {
		t.Fatalf("count %d, want %d", x.count(), len(want))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestIndexEntryBytes: a stored session costs the index at most 48 bytes
// of heap for a 22-character id (its bytes, rounded to the allocator's
// 24, and a 16-byte string header) — issue 21's "an index entry you can
// name in bytes".
func TestIndexEntryBytes(t *testing.T) {
	const n = 100_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("session-%014d", i) // 22 characters
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var x index
	if err := x.ready(context.Background(), 0, func(context.Context) ([]string, error) {
		out := make([]string, n)
		for i, id := range ids {
			out[i] = string([]byte(id)) // the scan's own strings
		}
		return out, nil
	}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.1f bytes of heap per stored session in the index", per)
	if per > 48 {
		t.Errorf("the index holds %.1f bytes per stored session, want at most 48", per)
	}
	runtime.KeepAlive(&x)
	runtime.KeepAlive(ids)
}
