package jsvm_test

import (
	"bytes"
	"context"
	"testing"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/internal/jsvm"
)

// bytesVM is a VM whose globals __out and __in are DefineBytes's.
func bytesVM(t *testing.T, lim jsvm.Limits) *jsvm.VM {
	t.Helper()
	vm := newVM(t, lim)
	if err := vm.Run(context.Background(), func(*quickjs.VM) error { return vm.DefineBytes("__out", "__in") }); err != nil {
		t.Fatal(err)
	}
	return vm
}

// TestBytes: out copies exactly the bytes a Uint8Array views (a subarray's
// window, none of its buffer's others) and in makes a buffer of exactly
// what Go gave, in order; anything but a byte array — another typed array,
// a plain array, a Proxy of a Uint8Array, a detached buffer's view — and
// an in with nothing given throw a TypeError the script may catch, and hand
// nothing over.
func TestBytes(t *testing.T) {
	ctx := context.Background()
	vm := bytesVM(t, jsvm.Limits{})
	got, err := eval(ctx, vm, `__out(new Uint8Array([1, 2, 3, 4, 5]).subarray(1, 4))`)
	if err != nil || got != 3 {
		t.Fatalf("out of a subarray: %v %v, want 3", got, err)
	}
	if b, ok := vm.TakeBytes(); !ok || !bytes.Equal(b, []byte{2, 3, 4}) {
		t.Fatalf("taken %v %v, want [2 3 4]", b, ok)
	}
	if _, ok := vm.TakeBytes(); ok {
		t.Fatal("taken twice")
	}
	if _, err := eval(ctx, vm, `__out(new Uint8Array(0))`); err != nil {
		t.Fatal(err)
	}
	if b, ok := vm.TakeBytes(); !ok || len(b) != 0 {
		t.Fatalf("an empty array: %v %v", b, ok)
	}

	// A view that tracks a resizable buffer's length: the engine keeps
	// the length it had when made, the script sees the buffer's.
	got, err = eval(ctx, vm, `{ const r = new ArrayBuffer(8, {maxByteLength: 16}), v = new Uint8Array(r, 2); r.resize(12); v.fill(5); __out(v) + " " + v.length }`)
	if b, _ := vm.TakeBytes(); err != nil || got != "10 10" || !bytes.Equal(b, bytes.Repeat([]byte{5}, 10)) {
		t.Fatalf("a length-tracking view grown: %v %v, taken %v", got, err, b)
	}

	vm.GiveBytes([]byte{9, 8, 7})
	vm.GiveBytes(nil)
	got, err = eval(ctx, vm, `const a = new Uint8Array(__in()), b = __in(); [...a].join(",") + "|" + b.byteLength + "|" + (b instanceof ArrayBuffer)`)
	if err != nil || got != "9,8,7|0|true" {
		t.Fatalf("in: %v %v", got, err)
	}

	for _, src := range []string{
		`__out([1, 2])`,
		`__out(new Int16Array(2))`,
		`__out(new DataView(new ArrayBuffer(2)))`,
		`__out(new Proxy(new Uint8Array(2), {}))`,
		`__out("text")`,
		`__out()`,
		`const d = new Uint8Array(4); d.buffer.transfer(); __out(d)`,
		`const r = new ArrayBuffer(8, {maxByteLength: 16}), v = new Uint8Array(r, 4, 4); r.resize(2); __out(v)`,
		`__in()`,
	} {
		got, err := eval(ctx, vm, `(() => { try { `+src+`; return "no error" } catch (e) { return e instanceof TypeError ? "TypeError" : String(e) } })()`)
		if err != nil || got != "TypeError" {
			t.Errorf("%s: %v %v, want a TypeError", src, got, err)
		}
		if b, ok := vm.TakeBytes(); ok {
			t.Errorf("%s handed %v over", src, b)
		}
	}
}

// TestBytesWithinTheRealmsMemory: the buffer in() makes counts toward the
// realm's memory limit (a gift larger than it is too_large, not memory
// the limit does not see), and a large out copies without a second copy
// in the realm: 24 MiB out of a 32 MiB realm, which base64 inside JSON
// (four times the bytes) could never have held.
func TestBytesWithinTheRealmsMemory(t *testing.T) {
	ctx := context.Background()
	vm := bytesVM(t, jsvm.Limits{MemoryBytes: 32 << 20})
	got, err := eval(ctx, vm, `{ const a = new Uint8Array(24 << 20); a[a.length - 1] = 7; __out(a) }`)
	if err != nil || got != 24<<20 {
		t.Fatalf("24 MiB out of a 32 MiB realm: %v %v", got, err)
	}
	if b, ok := vm.TakeBytes(); !ok || len(b) != 24<<20 || b[len(b)-1] != 7 {
		t.Fatalf("taken %d bytes", len(b))
	}
	vm.GiveBytes(make([]byte, 40<<20))
	_, err = eval(ctx, vm, `__in().byteLength`)
	if jsvm.KindOf(err) != jsvm.Memory {
		t.Fatalf("40 MiB into a 32 MiB realm: %v, want out of memory", err)
	}
}
