package jsvm_test

import (
	"context"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/jsvm"
)

// TestOutOfMemoryStops: with Limits.OutOfMemoryStops, a script that
// catches the engine's out-of-memory error and tries again, or returns
// right after catching it, still fails with Memory; without it the catch
// works (TestThrown). The VM serves the next script either way.
func TestOutOfMemoryStops(t *testing.T) {
	vm := newVM(t, jsvm.Limits{MemoryBytes: 8 << 20, OutOfMemoryStops: true})
	// A deadline, so that a regression fails rather than hangs: the
	// engine's strings are ropes, so a doubling string passes its length
	// limit ("string too long", which a script may catch) before its
	// memory; these fail allocations.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, src := range []string{
		`for (;;) { try { const a = []; for (;;) a.push("x".repeat(100) + a.length) } catch (e) {} }`,
		`{ let r; try { const a = []; for (;;) a.push([a.length]) } catch (e) { r = String(e) } r }`,
		`{ let r = 0; try { new Float64Array(1e8) } catch (e) { r = 1 } r }`,
	} {
		if _, err := eval(ctx, vm, src); jsvm.KindOf(err) != jsvm.Memory {
			t.Fatalf("%s: %v, want out of memory", src, err)
		}
		if out, err := eval(ctx, vm, `1 + 1`); err != nil || out != 2 {
			t.Fatalf("the next script: %v, %v", out, err)
		}
	}
	// An allocation that fits is not a failure: a script that frees what
	// it took and allocates again runs to its end.
	out, err := eval(ctx, vm, `{ let n = 0; for (let i = 0; i < 20; i++) { let a = new Uint8Array(4 << 20); n += a.length } n }`)
	if err != nil || out != 20*(4<<20) {
		t.Fatalf("allocations within the limit: %v, %v", out, err)
	}
}

// TestOnCloseAfterFree: a function registered on a VM already freed runs
// at once, so a caller that learns of a given-up script late still hears
// of its end.
func TestOnCloseAfterFree(t *testing.T) {
	vm, err := jsvm.New(jsvm.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	order := []string{}
	vm.OnClose(func() { order = append(order, "before") })
	vm.Close()
	vm.OnClose(func() { order = append(order, "after") })
	if len(order) != 2 || order[0] != "before" || order[1] != "after" {
		t.Fatalf("OnClose ran %v", order)
	}
}

// TestGC: the collector frees the cycles a script left (a closure and its
// prototype object are a cycle), which reference counting does not.
func TestGC(t *testing.T) {
	vm := newVM(t, jsvm.Limits{})
	ctx := context.Background()
	vm.GC()
	base := vm.HeapBytes()
	if _, err := eval(ctx, vm, `{ const a = []; for (let i = 0; i < 2000; i++) { const o = {}; o.self = o; o.pad = "x".repeat(100) + i; a.push(o) } }`); err != nil {
		t.Fatal(err)
	}
	left := vm.HeapBytes() - base
	vm.GC()
	after := vm.HeapBytes() - base
	if left < 100<<10 || after > left/4 {
		t.Fatalf("cycles left %d KiB, %d KiB after GC", left>>10, after>>10)
	}
}
