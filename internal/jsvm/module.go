package jsvm

import (
	"errors"
	"reflect"
	"strings"
	"unsafe"

	"modernc.org/libc"
	lib "modernc.org/libquickjs"
	"modernc.org/quickjs"
)

// ErrAwaitNeverSettled is what [VM.EvalModule] returns when the module's
// top-level await waits on a promise that nothing can settle any more: no
// job is left to run and the module has not finished.
var ErrAwaitNeverSettled = errors.New("the module's top-level await never settled: it waits on a promise nothing resolves (brain's realms have no timers or I/O events to settle one later)")

// vmField is the offset of a quickjs.Value's VM, or -1 when the layout is
// not the one expected (TestEvalModule checks it).
var vmField = func() uintptr {
	f, ok := reflect.TypeFor[quickjs.Value]().FieldByName("vm")
	if !ok || f.Type != reflect.TypeFor[*quickjs.VM]() {
		return ^uintptr(0)
	}
	return f.Offset
}()

// wrap makes a quickjs.Value of q's that owns tv.
func wrap(q *quickjs.VM, tv lib.TJSValue) quickjs.Value {
	var x quickjs.Value
	*(**quickjs.VM)(unsafe.Add(unsafe.Pointer(&x), vmField)) = q
	*(*lib.TJSValue)(unsafe.Add(unsafe.Pointer(&x), valueField)) = tv
	return x
}

// errorOf turns tv, which it frees, into the error modernc.org/quickjs
// makes of a thrown value (which goes on with a panic of a Go function the
// script called, as its own calls do).
func (v *VM) errorOf(tv lib.TJSValue) error {
	x := wrap(v.q, tv)
	defer x.Free()
	return quickjs.ErrorFromValue(x)
}

// EvalModule evaluates code, a module compiled by quickjs.VM.Compile with
// quickjs.EvalModule, and runs the promise jobs its top-level await needs
// until the module has finished. A module that throws, or whose top-level
// await rejects, fails with what it threw; one still waiting when no job
// is left fails with [ErrAwaitNeverSettled]. Call it inside [VM.Run].
//
// Why not quickjs.VM.EvalBytecode: it waits for a module with the engine's
// std event loop, which this package does not install, and which without
// it dereferences nil when the module still waits and no job is left.
func (v *VM) EvalModule(code []byte) error {
	if !v.eng.ok || valueField == ^uintptr(0) || vmField == ^uintptr(0) {
		return errors.New("jsvm: EvalModule: the engine cannot be read in this version")
	}
	q := v.q
	// An empty drain arms the engine's interrupt for this entry, as each
	// of modernc.org/quickjs's own calls into the engine does.
	if _, err := q.ExecutePendingJobs(); err != nil {
		return err
	}
	tls, ctx := v.eng.tls, uintptr(unsafe.Pointer(v.eng.ctx))
	buf := libc.Xmalloc(tls, lib.Tsize_t(max(len(code), 1)))
	if buf == 0 {
		return errors.New("OOM")
	}
	defer libc.Xfree(tls, buf)
	// buf is C memory (not Go memory), kept as a uintptr: read it as a
	// pointer without a uintptr-to-pointer conversion.
	copy(unsafe.Slice(*(**byte)(unsafe.Pointer(&buf)), len(code)), code)
	obj := lib.XJS_ReadObject(tls, ctx, buf, lib.Tsize_t(len(code)), lib.MJS_READ_OBJ_BYTECODE)
	if isException(obj) {
		return v.errorOf(lib.XJS_GetException(tls, ctx))
	}
	if int32(obj.Ftag) != int32(lib.EJS_TAG_MODULE) {
		lib.XFreeValue(tls, ctx, obj)
		return errors.New("jsvm: EvalModule: the code is not a module")
	}
	if lib.XJS_ResolveModule(tls, ctx, obj) < 0 {
		lib.XFreeValue(tls, ctx, obj)
		return v.errorOf(lib.XJS_GetException(tls, ctx))
	}
	p := lib.XJS_EvalFunction(tls, ctx, obj) // takes obj
	if isException(p) {
		return v.errorOf(lib.XJS_GetException(tls, ctx))
	}
	defer lib.XFreeValue(tls, ctx, p)
	for lib.XJS_PromiseState(tls, ctx, p) == lib.EJS_PROMISE_PENDING {
		n, err := q.ExecutePendingJobs()
		if err != nil && !strings.HasPrefix(err.Error(), "quickjs: aborted draining") {
			return err
		}
		if n == 0 {
			return ErrAwaitNeverSettled
		}
	}
	switch lib.XJS_PromiseState(tls, ctx, p) {
	case lib.EJS_PROMISE_REJECTED:
		return v.errorOf(lib.XJS_PromiseResult(tls, ctx, p))
	}
	return nil
}

func isException(x lib.TJSValue) bool { return int32(x.Ftag) == int32(lib.EJS_TAG_EXCEPTION) }
