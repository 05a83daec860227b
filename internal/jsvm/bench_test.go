package jsvm_test

import (
	"context"
	"testing"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/internal/jsvm"
)

// BenchmarkRunSmall is one Run of a small function on JSON arguments, as
// the js handle and the TypeScript host make them: the hand-off to the
// engine's goroutine, JSON.parse, the call, JSON.stringify.
func BenchmarkRunSmall(b *testing.B) {
	vm := newVM(b, jsvm.Limits{})
	var fn quickjs.Value
	if err := vm.Run(context.Background(), func(q *quickjs.VM) error {
		var err error
		fn, err = q.EvalValue(`(s) => JSON.stringify(((args) => args.a + args.b)(JSON.parse(s)))`, quickjs.EvalGlobal)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var out any
		err := vm.Run(ctx, func(*quickjs.VM) error {
			var err error
			out, err = fn.Call(quickjs.UndefinedValue, `{"a": 2, "b": 3}`)
			return err
		})
		if err != nil || out != "5" {
			b.Fatalf("%v, %v", out, err)
		}
	}
}

// BenchmarkNew is the cost of a fresh VM: a runtime and a realm with every
// built-in.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		vm, err := jsvm.New(jsvm.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		vm.Close()
	}
}

// TestHeap checks that the allocator counters are found (the layout of the
// pinned modernc.org/quickjs) and that they follow what a script keeps.
func TestHeap(t *testing.T) {
	vm := newVM(t, jsvm.Limits{})
	idle := vm.HeapBytes()
	if idle <= 0 {
		t.Fatalf("HeapBytes = %d: the allocator counters were not found", idle)
	}
	if _, err := eval(context.Background(), vm, `globalThis.kept = "x".repeat(1 << 20) + "y"; kept.length`); err != nil {
		t.Fatal(err)
	}
	if grew := vm.HeapBytes() - idle; grew < 1<<20 {
		t.Fatalf("the heap grew by %d bytes while a script kept 1 MiB", grew)
	}
	t.Logf("an idle VM's heap: %d KiB", idle>>10)
}
