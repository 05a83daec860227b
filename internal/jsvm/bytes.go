package jsvm

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"modernc.org/libc"
	lib "modernc.org/libquickjs"
)

// Bytes cross between a script and Go through two functions of the
// engine's own ([VM.DefineBytes]) rather than as base64 inside JSON: a
// string of base64 and the JSON holding it are each a third larger than
// the bytes, and a realm held them together, about four times the bytes
// in all — a TypeScript tool could not write a file of half its memory
// limit. Copied straight from a typed array's memory, or into a new
// ArrayBuffer, the bytes are in the realm once.

// byteVMs maps an engine context's address to its VM, for the byte
// functions, which the engine calls with the context only.
var byteVMs sync.Map // uintptr → *VM

// bytesState is what the byte functions hand over: the bytes a script
// gave (out), and those Go gives it, in order (in).
type bytesState struct {
	out    []byte
	outSet bool
	in     [][]byte
}

// DefineBytes defines two global functions of the engine's own, for a
// host's set-up code to keep and delete before any other script runs
// (they read and write the host's side of the exchange):
//
//   - out(bytes) copies the bytes a Uint8Array (or Uint8ClampedArray)
//     sees into Go, where [VM.TakeBytes] takes them, replacing those an
//     earlier out left, and returns their count. Anything else (a Proxy
//     of one, another typed array, a detached buffer) throws a TypeError.
//   - in() returns a new ArrayBuffer holding the bytes the oldest
//     [VM.GiveBytes] still waiting gave (its allocation counts toward the
//     realm's memory, as any other), or throws a TypeError when none waits.
//
// Call it inside [VM.Run]; it fails when the engine cannot be read in this
// version.
func (v *VM) DefineBytes(out, in string) error {
	if !v.eng.ok {
		return errors.New("jsvm: DefineBytes: the engine cannot be read in this version")
	}
	byteVMs.Store(uintptr(unsafe.Pointer(v.eng.ctx)), v)
	v.OnClose(func() { byteVMs.Delete(uintptr(unsafe.Pointer(v.eng.ctx))) })
	for name, f := range map[string]any{out: bytesOutC, in: bytesInC} {
		if err := v.defineC(name, f, 1); err != nil {
			return fmt.Errorf("jsvm: DefineBytes: %w", err)
		}
	}
	return nil
}

// TakeBytes returns the bytes the script's latest out(bytes) copied, and
// forgets them; ok is false when it gave none since the last take.
func (v *VM) TakeBytes() (b []byte, ok bool) {
	b, ok = v.bytes.out, v.bytes.outSet
	v.bytes.out, v.bytes.outSet = nil, false
	return b, ok
}

// GiveBytes queues b for the script's next in(); it returns how many wait
// before it. b must not change until in() has taken it.
func (v *VM) GiveBytes(b []byte) int {
	v.bytes.in = append(v.bytes.in, b)
	return len(v.bytes.in) - 1
}

// ClearBytes forgets what was given and not taken, both ways.
func (v *VM) ClearBytes() { v.bytes = bytesState{} }

// defineC defines the global function name as the C function f.
func (v *VM) defineC(name string, f any, nargs int32) error {
	tls, ctx := v.eng.tls, uintptr(unsafe.Pointer(v.eng.ctx))
	cname, err := libc.CString(name)
	if err != nil {
		return err
	}
	defer libc.Xfree(tls, cname)
	fn := lib.XJS_NewCFunction2(tls, ctx, cfunc(f), cname, nargs, lib.EJS_CFUNC_generic, 0)
	if int32(fn.Ftag) == int32(lib.EJS_TAG_EXCEPTION) {
		return errors.New("the engine could not make the function " + name)
	}
	// SetPropertyStr takes fn, and borrows the global object.
	if lib.XJS_SetPropertyStr(tls, ctx, v.eng.ctx.Fglobal_obj, cname, fn) < 0 {
		return errors.New("the engine could not define the global " + name)
	}
	return nil
}

// throwType throws a TypeError saying msg in ctx and returns the
// exception. msg is the error's format string: it holds no %.
func throwType(tls *libc.TLS, ctx uintptr, msg string) lib.TJSValue {
	cmsg, err := libc.CString(msg)
	if err != nil {
		return lib.XJS_ThrowOutOfMemory(tls, ctx)
	}
	defer libc.Xfree(tls, cmsg)
	return lib.XJS_ThrowTypeError(tls, ctx, cmsg, 0)
}

// bytesOutC is out(bytes) of DefineBytes, as the engine calls a C function.
func bytesOutC(tls *libc.TLS, ctx uintptr, _ lib.TJSValue, argc int32, argv uintptr) lib.TJSValue {
	x, ok := byteVMs.Load(ctx)
	if !ok {
		return throwType(tls, ctx, "no host takes bytes here")
	}
	v := x.(*VM)
	if argc < 1 {
		return throwType(tls, ctx, "want a Uint8Array")
	}
	// argv is C memory the engine owns: read it as a pointer without a
	// uintptr-to-pointer conversion.
	a := **(**lib.TJSValue)(unsafe.Pointer(&argv))
	if int32(a.Ftag) != int32(lib.EJS_TAG_OBJECT) {
		return throwType(tls, ctx, "want a Uint8Array")
	}
	o := *(**lib.TJSObject)(unsafe.Pointer(&a))
	if o == nil || (o.Fclass_id != lib.EJS_CLASS_UINT8_ARRAY && o.Fclass_id != lib.EJS_CLASS_UINT8C_ARRAY) {
		// Byte arrays only: a Proxy (whose traps a script controls) or
		// anything else is refused before the engine is asked.
		return throwType(tls, ctx, "want a Uint8Array")
	}
	// The offsets the engine writes: C stack memory of the engine's own,
	// which does not move as a goroutine's stack may.
	bp := tls.Alloc(24)
	defer tls.Free(24)
	buf := lib.XJS_GetTypedArrayBuffer(tls, ctx, a, bp, bp+8, bp+16)
	if int32(buf.Ftag) == int32(lib.EJS_TAG_EXCEPTION) {
		return buf
	}
	defer lib.XFreeValue(tls, ctx, buf)
	off, n := sizeAt(bp), sizeAt(bp+8)
	sp := tls.Alloc(8)
	defer tls.Free(8)
	data := lib.XJS_GetArrayBuffer(tls, ctx, sp, buf)
	if data == 0 {
		return throwType(tls, ctx, "the array's buffer is detached")
	}
	size := sizeAt(sp)
	// The view's object holds its JSTypedArray, whose length the engine
	// does not keep for a view that tracks a resizable buffer's length
	// (JS_GetTypedArrayBuffer gives the length at its making): such a
	// view's bytes are its buffer's from its offset on.
	ta := *(**lib.TJSTypedArray)(unsafe.Pointer(&o.Fu))
	if ta != nil && ta.Ftrack_rab != 0 && off <= size {
		n = size - off
	}
	if off > size || n > size-off {
		// A view past its buffer's end (a resizable buffer shrunk under
		// it): nothing is read outside the buffer.
		return throwType(tls, ctx, "the array reaches past its buffer")
	}
	b := make([]byte, n)
	if n > 0 {
		p := data + uintptr(off)
		// C memory the engine owns (the buffer's bytes, n of them from p):
		// read as a pointer without a uintptr-to-pointer conversion.
		copy(b, unsafe.Slice(*(**byte)(unsafe.Pointer(&p)), n))
	}
	v.bytes.out, v.bytes.outSet = b, true
	return lib.XNewInt32(tls, ctx, int32(min(n, 1<<31-1)))
}

// sizeAt reads the size_t at p, C memory (the engine's stack): as a
// pointer, without a uintptr-to-pointer conversion.
func sizeAt(p uintptr) lib.Tsize_t { return **(**lib.Tsize_t)(unsafe.Pointer(&p)) }

// bytesInC is in() of DefineBytes, as the engine calls a C function.
func bytesInC(tls *libc.TLS, ctx uintptr, _ lib.TJSValue, _ int32, _ uintptr) lib.TJSValue {
	x, ok := byteVMs.Load(ctx)
	if !ok {
		return throwType(tls, ctx, "no host gives bytes here")
	}
	v := x.(*VM)
	if len(v.bytes.in) == 0 {
		return throwType(tls, ctx, "no bytes wait")
	}
	b := v.bytes.in[0]
	v.bytes.in[0] = nil
	v.bytes.in = v.bytes.in[1:]
	// The engine makes a zeroed buffer of its own (counted toward the
	// realm's limit: too large, it throws out of memory), and the bytes
	// are copied in here: the engine's memcpy from Go memory would be
	// pointer arithmetic on a Go object, which Go forbids.
	r := lib.XJS_NewArrayBufferCopy(tls, ctx, 0, lib.Tsize_t(len(b)))
	if int32(r.Ftag) == int32(lib.EJS_TAG_EXCEPTION) || len(b) == 0 {
		return r
	}
	sp := tls.Alloc(8)
	defer tls.Free(8)
	data := lib.XJS_GetArrayBuffer(tls, ctx, sp, r)
	if data == 0 || sizeAt(sp) != lib.Tsize_t(len(b)) {
		lib.XFreeValue(tls, ctx, r)
		return throwType(tls, ctx, "the engine made no buffer for the bytes")
	}
	// C memory the engine owns, len(b) bytes from data: written as a
	// pointer without a uintptr-to-pointer conversion.
	copy(unsafe.Slice(*(**byte)(unsafe.Pointer(&data)), len(b)), b)
	return r
}
