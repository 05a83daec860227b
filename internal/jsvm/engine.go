package jsvm

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"modernc.org/libc"
	lib "modernc.org/libquickjs"
	"modernc.org/quickjs"
)

// engine is what this package reads of a quickjs.VM that modernc.org/quickjs
// does not export: the runtime's C pointer and the libc.TLS that every call
// into the transpiled engine takes. The layout is that of the versions
// go.mod pins; TestHeap and TestOutOfMemoryStops check it.
type engine struct {
	tls *libc.TLS
	rt  *lib.TJSRuntime
	ctx *lib.TJSContext
	ok  bool
}

// engineOf returns q's engine, or ok false when the layout is not the one
// expected.
func engineOf(q *quickjs.VM) (e engine, ok bool) {
	st := reflect.ValueOf(q).Elem().FieldByName("state")
	if cc := st.FieldByName("cContext"); cc.IsValid() && cc.Kind() == reflect.Uintptr && cc.Uint() != 0 {
		c := uintptr(cc.Uint())
		// C memory the engine owns, kept as a uintptr by the port: read
		// as a pointer without a uintptr-to-pointer conversion.
		e.ctx = *(**lib.TJSContext)(unsafe.Pointer(&c))
	}
	if e.ctx == nil {
		return e, false
	}
	rt := st.FieldByName("runtime")
	if !rt.IsValid() || rt.Kind() != reflect.Pointer || rt.IsNil() {
		return e, false
	}
	c, ok := rt.Type().Elem().FieldByName("cRuntime")
	if !ok || c.Type.Kind() != reflect.Uintptr {
		return e, false
	}
	t, ok := rt.Type().Elem().FieldByName("tls")
	if !ok || t.Type != reflect.TypeFor[*libc.TLS]() {
		return e, false
	}
	base := unsafe.Pointer(rt.Pointer())
	cr := *(*uintptr)(unsafe.Add(base, c.Offset))
	if cr == 0 {
		return e, false
	}
	// cr is the address of C memory the engine owns (not Go memory), kept
	// as a uintptr by the transpiled code; read it as a pointer without a
	// uintptr-to-pointer conversion.
	e.rt = *(**lib.TJSRuntime)(unsafe.Pointer(&cr))
	e.tls = *(**libc.TLS)(unsafe.Add(base, t.Offset))
	e.ok = e.tls != nil
	return e, e.ok
}

// rtAddr is the runtime's address as the transpiled code passes it.
func (e engine) rtAddr() uintptr { return uintptr(unsafe.Pointer(e.rt)) }

// GC runs the engine's garbage collector, which frees the cycles that
// reference counting leaves (a function and its prototype object are one).
// Call it between Runs, from the goroutine that owns the VM; it does
// nothing on a VM that is gone or closed, or whose engine cannot be read.
func (v *VM) GC() {
	v.mu.Lock()
	dead := v.gone || v.closed || v.busy
	v.mu.Unlock()
	if dead || !v.eng.ok {
		return
	}
	lib.XJS_RunGC(v.eng.tls, v.eng.rtAddr())
}

// The allocator hook. The engine allocates through function pointers in
// its runtime (malloc_ctx.mf), which the default allocator fills; the
// default one returns NULL for an allocation that would pass the memory
// limit, and the engine then throws an out-of-memory InternalError that a
// script may catch (or null, when no memory is left for the error). Every
// VM whose engine this package can read has hookMalloc and hookRealloc in
// their place: they call the default functions and, on a failure, mark
// the VM ([VM.OutOfMemory] tells a script's own `throw null` from the
// engine's); a VM made with Limits.OutOfMemoryStops is interrupted as
// well, so that the script is stopped at the engine's next poll whatever
// it catches.
var (
	hookOnce    sync.Once
	hookOK      bool    // the defaults were found and may be wrapped
	defMalloc   uintptr // the default functions, as the engine calls them
	defRealloc  uintptr
	hookedState sync.Map // uintptr (a runtime's malloc state) → *VM
)

// cfunc returns the C function pointer of f, a top-level Go function with
// the C signature, as the transpiled code represents function pointers: a
// pointer to the func value, which for a top-level function is static.
func cfunc(f any) uintptr {
	type iface [2]uintptr
	return (*iface)(unsafe.Pointer(&f))[1]
}

type mallocFunc = func(*libc.TLS, uintptr, lib.Tsize_t) uintptr
type reallocFunc = func(*libc.TLS, uintptr, uintptr, lib.Tsize_t) uintptr

func hookMalloc(tls *libc.TLS, s uintptr, size lib.Tsize_t) uintptr {
	p := (*(*mallocFunc)(unsafe.Pointer(&struct{ uintptr }{defMalloc})))(tls, s, size)
	if p == 0 && size != 0 {
		outOfMemory(s)
	}
	return p
}

func hookRealloc(tls *libc.TLS, s, ptr uintptr, size lib.Tsize_t) uintptr {
	p := (*(*reallocFunc)(unsafe.Pointer(&struct{ uintptr }{defRealloc})))(tls, s, ptr, size)
	if p == 0 && size != 0 {
		outOfMemory(s)
	}
	return p
}

// outOfMemory marks the VM whose malloc state is s and, under
// Limits.OutOfMemoryStops, interrupts it. It runs on the engine's
// goroutine, inside an allocation.
func outOfMemory(s uintptr) {
	if x, ok := hookedState.Load(s); ok {
		v := x.(*VM)
		v.oom.Store(true)
		if v.lim.OutOfMemoryStops {
			v.q.Interrupt()
		}
	}
}

// hookAllocator puts the hooks in v's runtime; it reports false when the
// runtime's allocator is not the default one this package knows.
func (v *VM) hookAllocator() bool {
	if !v.eng.ok {
		return false
	}
	mf := &v.eng.rt.Fmalloc_ctx.Fmf
	hookOnce.Do(func() {
		defMalloc, defRealloc = mf.Fjs_malloc, mf.Fjs_realloc
		hookOK = defMalloc != 0 && defRealloc != 0
	})
	if !hookOK || mf.Fjs_malloc != defMalloc || mf.Fjs_realloc != defRealloc {
		return false
	}
	hookedState.Store(uintptr(unsafe.Pointer(v.heap)), v)
	mf.Fjs_malloc = cfunc(hookMalloc)
	mf.Fjs_realloc = cfunc(hookRealloc)
	return true
}

// unhookAllocator forgets v before its engine is freed (the hooks stay in
// place until then: freeing calls only js_free).
func (v *VM) unhookAllocator() {
	if v.hooked {
		hookedState.Delete(uintptr(unsafe.Pointer(v.heap)))
	}
}

// valueField is the offset of a quickjs.Value's engine value, which
// modernc.org/quickjs does not export, or -1 when the layout is not the
// one expected (TestIsProxy checks it).
var valueField = func() uintptr {
	f, ok := reflect.TypeFor[quickjs.Value]().FieldByName("v")
	if !ok || f.Type != reflect.TypeFor[lib.TJSValue]() {
		return ^uintptr(0)
	}
	return f.Offset
}()

// IsProxy reports whether x is a Proxy object, which no script can tell
// (a Proxy is built to be indistinguishable from its target): for a host
// function, registered with a quickjs.Value parameter, that must not let
// a script's traps answer in the place of the engine's own objects. It
// reports false when the layout of quickjs.Value is not the one expected.
func IsProxy(x quickjs.Value) bool {
	if valueField == ^uintptr(0) {
		return false
	}
	tv := *(*lib.TJSValue)(unsafe.Add(unsafe.Pointer(&x), valueField))
	if int32(tv.Ftag) != int32(lib.EJS_TAG_OBJECT) {
		return false
	}
	// The value's first word is the object's address, C memory the engine
	// owns: read it as a pointer without a uintptr-to-pointer conversion.
	o := *(**lib.TJSObject)(unsafe.Pointer(&tv))
	return o != nil && o.Fclass_id == lib.EJS_CLASS_PROXY
}

// ProxyCheckWorks reports whether [IsProxy] can read quickjs.Value.
func ProxyCheckWorks() bool { return valueField != ^uintptr(0) }

// Shape is what [VM.GlobalShape] reads of the global object.
type Shape struct {
	Props      int32   // own properties, private fields included
	Proto      uintptr // the prototype's address
	Extensible bool
}

// GlobalShape reads the global object's shape straight from the engine,
// without running JavaScript: a caller that keeps a realm from call to
// call compares it with the shape it left, and runs its tidy-up only when
// they differ. A private field stamped on the global object counts, which
// no script can list. ok is false when the engine's layout is not the one
// this package knows (then every check must be made in JavaScript). Call
// it between Runs.
func (v *VM) GlobalShape() (s Shape, ok bool) {
	if !v.eng.ok {
		return s, false
	}
	g := v.eng.ctx.Fglobal_obj
	if int32(g.Ftag) != int32(lib.EJS_TAG_OBJECT) {
		return s, false
	}
	o := *(**lib.TJSObject)(unsafe.Pointer(&g))
	if o == nil || o.Fshape == 0 {
		return s, false
	}
	sh := o.Fshape
	shape := *(**lib.TJSShape)(unsafe.Pointer(&sh))
	s.Props = shape.Fprop_count - shape.Fdeleted_prop_count
	s.Proto = shape.Fproto
	s.Extensible = lib.XJS_IsExtensible(v.eng.tls, uintptr(unsafe.Pointer(v.eng.ctx)), g) == 1
	return s, true
}

// isProxyC is [IsProxy] as a function of the engine's own (a JSCFunction,
// as the transpiled engine calls one): a script's call of it costs what a
// built-in's does, where a Go function registered through
// modernc.org/quickjs converts its arguments and result, some
// microseconds a call.
func isProxyC(_ *libc.TLS, _ uintptr, _ lib.TJSValue, argc int32, argv uintptr) lib.TJSValue {
	r := lib.TJSValue{Ftag: int64(lib.EJS_TAG_BOOL)}
	if argc < 1 {
		return r
	}
	// argv is C memory the engine owns: read it as a pointer without a
	// uintptr-to-pointer conversion.
	a := **(**lib.TJSValue)(unsafe.Pointer(&argv))
	if int32(a.Ftag) != int32(lib.EJS_TAG_OBJECT) {
		return r
	}
	if o := *(**lib.TJSObject)(unsafe.Pointer(&a)); o != nil && o.Fclass_id == lib.EJS_CLASS_PROXY {
		r.Fu.Fuint641 = 1
	}
	return r
}

// DefineIsProxy defines the global function name, which reports whether
// its argument is a Proxy object (as [IsProxy]), as a function of the
// engine's own: no script can tell a Proxy from its target, and a host's
// set-up code that must not let a script's traps answer for it checks
// with this. Call it on the goroutine that runs the VM's scripts (inside
// [VM.Run]); it fails when the engine cannot be read in this version.
func (v *VM) DefineIsProxy(name string) error {
	if !v.eng.ok || valueField == ^uintptr(0) {
		return errors.New("jsvm: DefineIsProxy: the engine cannot be read in this version")
	}
	tls, ctx := v.eng.tls, uintptr(unsafe.Pointer(v.eng.ctx))
	cname, err := libc.CString(name)
	if err != nil {
		return fmt.Errorf("jsvm: DefineIsProxy: %w", err)
	}
	defer libc.Xfree(tls, cname)
	f := lib.XJS_NewCFunction2(tls, ctx, cfunc(isProxyC), cname, 1, lib.EJS_CFUNC_generic, 0)
	if int32(f.Ftag) == int32(lib.EJS_TAG_EXCEPTION) {
		return errors.New("jsvm: DefineIsProxy: the engine could not make the function")
	}
	// SetPropertyStr takes f, and borrows the global object.
	if lib.XJS_SetPropertyStr(tls, ctx, v.eng.ctx.Fglobal_obj, cname, f) < 0 {
		return errors.New("jsvm: DefineIsProxy: the engine could not define the global")
	}
	return nil
}
