package script

import (
	"fmt"
	"math"
	"reflect"

	"github.com/dop251/goja"
)

// intrinsicsProgram reaches the built-ins that have no global name. It is
// compiled once: a goja Program can run in many runtimes concurrently.
var intrinsicsProgram = goja.MustCompile("intrinsics.js", `(function () {
	var ta = Object.getPrototypeOf(Uint8Array);
	return [
		Object.getPrototypeOf(function* () {}).constructor,
		Object.getPrototypeOf(async function () {}).constructor,
		Object.getPrototypeOf([][Symbol.iterator]()),
		Object.getPrototypeOf(""[Symbol.iterator]()),
		ta,
		Object.getOwnPropertyDescriptor(ta.prototype, "length").get,
	];
})()`, true)

// intrinsics are built-ins captured before any script code runs: the
// guards call these, never what the script may have put in their place.
type intrinsics struct {
	ownDescriptor    goja.Callable // Object.getOwnPropertyDescriptor
	isArray          goja.Callable // Array.isArray
	construct        goja.Callable // Reflect.construct
	has              goja.Callable // Reflect.has
	rangeError       *goja.Object  // RangeError
	typedArrayLength goja.Value    // the getter of %TypedArray%.prototype.length
}

var (
	proxyType       = reflect.TypeOf(goja.Proxy{})
	arrayBufferType = reflect.TypeOf(goja.ArrayBuffer{})
)

// setup prepares a fresh runtime: it bounds the call stack, removes the one
// global goja adds beyond the language (GoError), and replaces the
// built-ins that could allocate or loop without bound in Go code, where
// neither interrupts nor the heap watchdog can stop them, with guarded
// versions (guard_*.go).
//
// Nothing else is exposed: goja.New has no require, console, timers or
// host objects, and the arguments are parsed inside the runtime rather
// than passed in as Go values, so no reflection-backed object is ever
// reachable.
func (c *call) setup(vm *goja.Runtime) error {
	vm.SetMaxCallStackSize(maxCallDepth)
	global := vm.GlobalObject()
	if err := global.Delete("GoError"); err != nil {
		return fmt.Errorf("delete GoError: %w", err)
	}
	v, err := vm.RunProgram(intrinsicsProgram)
	if err != nil {
		return fmt.Errorf("intrinsics: %w", err)
	}
	list := object(v)
	var (
		generatorFunction = object(list.Get("0"))
		asyncFunction     = object(list.Get("1"))
		arrayIterator     = object(list.Get("2"))
		stringIterator    = object(list.Get("3"))
		typedArray        = object(list.Get("4"))
	)

	obj := object(global.Get("Object"))
	arr := object(global.Get("Array"))
	refl := object(global.Get("Reflect"))
	jsn := object(global.Get("JSON"))
	c.in = intrinsics{
		ownDescriptor:    function(obj.Get("getOwnPropertyDescriptor")),
		isArray:          function(arr.Get("isArray")),
		construct:        function(refl.Get("construct")),
		has:              function(refl.Get("has")),
		rangeError:       object(global.Get("RangeError")),
		typedArrayLength: list.Get("5"),
	}

	c.guardStrings(vm, global)
	c.guardArrays(vm, global, arrayIterator, stringIterator)
	c.guardObjects(vm, global)
	c.guardBuffers(vm, global, typedArray)
	c.guardJSON(vm, jsn)
	c.guardCompilers(vm, global, generatorFunction, asyncFunction)
	if c.grants.Timeout > matchTimeout {
		c.guardRegExp(vm, global)
	}
	return nil
}

// object returns v as an object; setup uses it on built-ins that are
// objects in every goja runtime.
func object(v goja.Value) *goja.Object {
	o, ok := v.(*goja.Object)
	if !ok {
		panic(fmt.Sprintf("script: built-in %v is not an object", v))
	}
	return o
}

// function returns v as a callable; see object.
func function(v goja.Value) goja.Callable {
	f, ok := goja.AssertFunction(v)
	if !ok {
		panic(fmt.Sprintf("script: built-in %v is not a function", v))
	}
	return f
}

// trapFunc is a guarded built-in: orig is the original, captured before any
// script code ran.
type trapFunc func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value

// replace swaps holder[key] (a string or a *goja.Symbol) for a Proxy of
// the original whose calls go through trap. A Proxy keeps the original's
// name, length and prototype, and keeps the original itself out of reach:
// a Proxy's target cannot be read back.
func (c *call) replace(vm *goja.Runtime, holder *goja.Object, key any, trap trapFunc) *goja.Object {
	orig := getKey(holder, key)
	fn := function(orig)
	p := vm.NewProxy(object(orig), &goja.ProxyTrapConfig{
		Apply: func(_ *goja.Object, this goja.Value, args []goja.Value) goja.Value {
			if c.stopped.Load() {
				return goja.Undefined()
			}
			return trap(fn, this, args)
		},
	})
	pv := vm.ToValue(p).(*goja.Object)
	defineKey(holder, key, pv)
	return pv
}

// replaceCtor swaps the constructor holder[key] for a Proxy whose calls
// and constructions first pass their arguments through check, which may
// coerce them (so that the original sees primitives and runs no script
// code between the check and its use) or stop the call. The prototype's
// constructor property is pointed at the Proxy too, so the original cannot
// be reached that way.
func (c *call) replaceCtor(vm *goja.Runtime, holder *goja.Object, key string, check func(args []goja.Value) []goja.Value) *goja.Object {
	orig := object(holder.Get(key))
	fn := function(orig)
	p := vm.NewProxy(orig, &goja.ProxyTrapConfig{
		Apply: func(_ *goja.Object, this goja.Value, args []goja.Value) goja.Value {
			if c.stopped.Load() {
				return goja.Undefined()
			}
			if args = check(args); c.stopped.Load() {
				return goja.Undefined()
			}
			return c.invoke(fn, this, args...)
		},
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			if c.stopped.Load() {
				return vm.NewObject()
			}
			if args = check(args); c.stopped.Load() {
				return vm.NewObject()
			}
			list := make([]any, len(args))
			for i, a := range args {
				list[i] = a
			}
			// Reflect.construct keeps new.target, so subclasses still work.
			return object(c.invoke(c.in.construct, goja.Undefined(), orig, vm.NewArray(list...), newTarget))
		},
	})
	pv := vm.ToValue(p).(*goja.Object)
	defineKey(holder, key, pv)
	if proto, ok := orig.Get("prototype").(*goja.Object); ok {
		defineKey(proto, "constructor", pv)
	}
	// goja's Proxy lacks [[HasInstance]], so "x instanceof Proxy" throws
	// even through Function.prototype[Symbol.hasInstance]; an own
	// Symbol.hasInstance on the target, reached through the Proxy's get,
	// answers instead.
	if c.hasInstance == nil {
		f := vm.ToValue(c.ordinaryHasInstance).(*goja.Object)
		// ToValue names a Go function after its Go symbol; name it as
		// the language names this method instead.
		if err := f.DefineDataProperty("name", vm.ToValue("[Symbol.hasInstance]"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			panic(fmt.Sprintf("script: name Symbol.hasInstance: %v", err))
		}
		if err := f.DefineDataProperty("length", vm.ToValue(1), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			panic(fmt.Sprintf("script: length of Symbol.hasInstance: %v", err))
		}
		c.hasInstance = f
	}
	if err := orig.DefineDataPropertySymbol(goja.SymHasInstance, c.hasInstance, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
		panic(fmt.Sprintf("script: define Symbol.hasInstance: %v", err))
	}
	return pv
}

// ordinaryHasInstance is OrdinaryHasInstance(this, v) for a constructor
// that replaceCtor wrapped.
func (c *call) ordinaryHasInstance(call goja.FunctionCall) goja.Value {
	o, ok := call.Argument(0).(*goja.Object)
	if !ok {
		return c.vm.ToValue(false)
	}
	proto, ok := call.This.ToObject(c.vm).Get("prototype").(*goja.Object)
	if !ok {
		c.throwType(c.vm, "Function has non-object prototype in instanceof check")
	}
	for p := o.Prototype(); p != nil; p = p.Prototype() {
		if p.SameAs(proto) {
			return c.vm.ToValue(true)
		}
	}
	return c.vm.ToValue(false)
}

func getKey(o *goja.Object, key any) goja.Value {
	switch k := key.(type) {
	case string:
		return o.Get(k)
	case *goja.Symbol:
		return o.GetSymbol(k)
	}
	panic(fmt.Sprintf("script: bad key %T", key))
}

// defineKey defines a built-in method: writable, configurable, not
// enumerable.
func defineKey(o *goja.Object, key any, v goja.Value) {
	var err error
	switch k := key.(type) {
	case string:
		err = o.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	case *goja.Symbol:
		err = o.DefineDataPropertySymbol(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	if err != nil {
		panic(fmt.Sprintf("script: define %v: %v", key, err))
	}
}

// invoke calls fn and rethrows its exception into the running script: a
// goja built-in throws by panicking with the exception.
func (c *call) invoke(fn goja.Callable, this goja.Value, args ...goja.Value) goja.Value {
	v, err := fn(this, args...)
	if err != nil {
		panic(err)
	}
	return v
}

// throwType throws a TypeError into the script.
func (c *call) throwType(vm *goja.Runtime, format string, args ...any) {
	panic(vm.NewTypeError(fmt.Sprintf(format, args...)))
}

// throwRange throws a RangeError into the script.
func (c *call) throwRange(vm *goja.Runtime, format string, args ...any) {
	e, err := vm.New(c.in.rangeError, vm.ToValue(fmt.Sprintf(format, args...)))
	if err != nil {
		panic(err)
	}
	panic(e)
}

// enter counts one level of recursion of a Go built-in, throwing a
// RangeError past maxNesting, as an engine does when its stack runs out;
// without it a cyclic or very deep structure would overflow the goroutine
// stack, which kills the process.
func (c *call) enter(vm *goja.Runtime, what string) {
	if c.depth >= maxNesting {
		c.throwRange(vm, "%s: nesting deeper than %d levels", what, maxNesting)
	}
	c.depth++
}

func (c *call) leave() { c.depth-- }

// lengthOf returns LengthOfArrayLike(v) without running script code, or
// ok=false when only script code could tell (a length getter, a Proxy, a
// length that is an object with valueOf). A guard that checks a length
// and then hands the object to a built-in that reads it again needs this:
// otherwise a getter could report a small length to the guard and a huge
// one to the built-in.
func (c *call) lengthOf(vm *goja.Runtime, v goja.Value) (n int64, ok bool) {
	o, isObj := v.(*goja.Object)
	if !isObj {
		if s, isStr := v.(goja.String); isStr {
			return int64(s.Length()), true
		}
		return 0, true // undefined and null throw in the built-in; other primitives have no length
	}
	switch o.ClassName() {
	case "Array", "String":
		// An array's length and a String object's length are data
		// properties that script code cannot redefine as accessors.
		return toLength(o.Get("length")), true
	}
	for p := o; p != nil; p = p.Prototype() {
		if p.ExportType() == proxyType {
			return 0, false
		}
		d, isDesc := c.invoke(c.in.ownDescriptor, goja.Undefined(), p, vm.ToValue("length")).(*goja.Object)
		if !isDesc {
			continue
		}
		// Only own keys of the descriptor are read: an inherited "value"
		// or "get" could be a getter on Object.prototype.
		for _, k := range d.Keys() {
			switch k {
			case "value":
				value := d.Get("value")
				if _, isObj := value.(*goja.Object); isObj {
					return 0, false
				}
				return toLength(value), true
			case "get":
				if g := d.Get("get"); g.SameAs(c.in.typedArrayLength) {
					// The built-in getter runs no script code; it throws
					// when o is not a typed array (TypedArray.prototype
					// itself), and so would the built-in that asked.
					var n int64
					if ex := vm.Try(func() { n = toLength(o.Get("length")) }); ex != nil {
						return 0, false
					}
					return n, true
				}
				return 0, false
			}
		}
		return 0, false
	}
	return 0, true
}

// toLength is ToLength of a primitive.
func toLength(v goja.Value) int64 {
	if v == nil {
		return 0
	}
	return lengthOfFloat(v.ToFloat())
}

func lengthOfFloat(f float64) int64 {
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= 1<<53-1:
		return 1<<53 - 1
	}
	return int64(f)
}

// arg returns args[i], or undefined.
func arg(args []goja.Value, i int) goja.Value {
	if i < len(args) {
		return args[i]
	}
	return goja.Undefined()
}

// nullish reports whether v is undefined or null.
func nullish(v goja.Value) bool {
	return v == nil || goja.IsUndefined(v) || goja.IsNull(v)
}

// toStr is ToString; on an object it runs its toString.
func toStr(vm *goja.Runtime, v goja.Value) goja.String {
	if s, ok := v.ToString().(goja.String); ok {
		return s
	}
	return vm.ToValue(v.String()).(goja.String)
}

// isArray is IsArray: true for arrays and for proxies of arrays.
func (c *call) isArray(v goja.Value) bool {
	o, ok := v.(*goja.Object)
	if !ok {
		return false
	}
	if o.ClassName() == "Array" {
		return true
	}
	if o.ExportType() != proxyType {
		return false
	}
	return c.invoke(c.in.isArray, goja.Undefined(), o).ToBoolean()
}
