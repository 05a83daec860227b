package script

import (
	"fmt"
	"strconv"

	"github.com/dop251/goja"
)

// A goja runtime is reused from Call to Call (setting one up costs ten
// times what a small call does), so nothing a script does may outlive its
// Call. lockdown, run once per runtime after the guards are in place,
// makes that hold:
//
//   - every built-in reachable from the global object, and the intrinsics
//     that have no global name (iterator and generator prototypes,
//     %TypedArray%), is frozen: no prototype can be polluted, no built-in
//     replaced, in this Call or for the next;
//   - the global object's own properties are made read-only and
//     permanent, but the global object stays extensible, so a script may
//     still create globals (globalThis.x = 1, var in an indirect eval);
//     after each Call, world.clean deletes every global the Call added,
//     and the runtime is discarded when one cannot be deleted or the
//     global object was changed otherwise (its prototype, its
//     extensibility);
//   - so that freezing does not break ordinary code through JavaScript's
//     "override mistake" (an assignment to an own property is refused when
//     a prototype has a read-only property of that name, as in
//     this.name = "MyError" in an Error subclass, or F.prototype.toString
//     = …), the properties constructor, toString, valueOf, toLocaleString,
//     toJSON, name and message of every built-in prototype become
//     accessors whose setter defines the property on the object assigned
//     to, as SES's lockdown does;
//   - a script is one expression (compile refuses "0); let x = 1; (0"), so
//     it declares nothing at the top level.
//
// Nothing else in a goja runtime carries a script's state from one Call to
// the next: the symbol registry holds no values and cannot be listed, and
// a stopped Call's runtime is never reused.
var lockdownProgram = goja.MustCompile("lockdown.js", `(function (ownKeys, gopd, dp, freeze, gpo, isExtensible, deleteProperty) {
	"use strict";
	// Only the built-ins passed in, captured before the guards replaced
	// any, and no iterators: the guards' checks would cost more than the
	// walk itself.
	const roots = [
		globalThis,
		gpo(function* () {}), gpo(async function () {}),
		gpo([][Symbol.iterator]()), gpo(""[Symbol.iterator]()),
		gpo(new Map().entries()), gpo(new Set().values()),
		gpo(/a/[Symbol.matchAll]("")), gpo(Uint8Array),
	];
	const seen = new Set(), list = [], protos = [Object.prototype], stack = [];
	for (let i = 0; i < roots.length; i++) stack[stack.length] = roots[i];
	while (stack.length > 0) {
		const o = stack[stack.length - 1];
		stack.length--;
		if ((typeof o !== "object" && typeof o !== "function") || o === null || seen.has(o)) continue;
		seen.add(o);
		list[list.length] = o;
		stack[stack.length] = gpo(o);
		const keys = ownKeys(o);
		for (let i = 0; i < keys.length; i++) {
			const d = gopd(o, keys[i]);
			if ("value" in d) {
				if (keys[i] === "prototype" && typeof o === "function") protos[protos.length] = d.value;
				stack[stack.length] = d.value;
			} else {
				stack[stack.length] = d.get;
				stack[stack.length] = d.set;
			}
		}
	}
	const overridable = ["constructor", "toString", "valueOf", "toLocaleString", "toJSON", "name", "message"];
	const tamed = new Set();
	for (let i = 0; i < protos.length; i++) {
		const p = protos[i];
		if ((typeof p !== "object" && typeof p !== "function") || p === null || p === globalThis || tamed.has(p)) continue;
		tamed.add(p);
		for (let j = 0; j < overridable.length; j++) {
			const k = overridable[j];
			const d = gopd(p, k);
			if (!d || !("value" in d) || !d.configurable) continue;
			const value = d.value;
			const get = function () { return value };
			const set = function (v) {
				if (this === p) throw new TypeError("Cannot assign to read only property '" + k + "' of a built-in prototype");
				dp(this, k, {value: v, writable: true, enumerable: true, configurable: true});
			};
			dp(p, k, {get, set, enumerable: d.enumerable, configurable: false});
			freeze(get);
			freeze(set);
		}
	}
	for (let i = 0; i < list.length; i++) {
		if (list[i] !== globalThis) freeze(list[i]);
	}
	const base = new Set(), globals = ownKeys(globalThis);
	for (let i = 0; i < globals.length; i++) {
		const k = globals[i];
		base.add(k);
		if ("value" in gopd(globalThis, k)) dp(globalThis, k, {writable: false, configurable: false});
		else dp(globalThis, k, {configurable: false});
	}
	const proto = gpo(globalThis), size = globals.length;
	// clean deletes the globals a Call added and reports whether the
	// global object is as lockdown left it.
	return function clean() {
		const keys = ownKeys(globalThis);
		if (keys.length !== size) {
			for (let i = 0; i < keys.length; i++) {
				if (!base.has(keys[i]) && !deleteProperty(globalThis, keys[i])) return false;
			}
		}
		return gpo(globalThis) === proto && isExtensible(globalThis);
	};
})`, true)

// originalsProgram captures, before the guards exist, the built-ins
// lockdownProgram uses.
var originalsProgram = goja.MustCompile("originals.js", `[Reflect.ownKeys, Object.getOwnPropertyDescriptor, Object.defineProperty,
	Object.freeze, Object.getPrototypeOf, Object.isExtensible, Reflect.deleteProperty]`, true)

// world is a locked-down runtime's global object, as lockdown left it.
type world struct {
	clean goja.Callable
	// global and base, when fast is true: the global object and its shape
	// right after lockdown, which reset compares first (see shapeOf).
	global *goja.Object
	base   shape
	fast   bool
}

// originals returns the built-ins lockdown needs, read before setup
// guards any.
func originals(vm *goja.Runtime) ([]goja.Value, error) {
	v, err := vm.RunProgram(originalsProgram)
	if err != nil {
		return nil, fmt.Errorf("lockdown: %w", err)
	}
	o := object(v)
	out := make([]goja.Value, 7)
	for i := range out {
		out[i] = o.Get(strconv.Itoa(i))
	}
	return out, nil
}

// lockdown freezes vm's built-ins (see lockdownProgram), using orig from
// originals, and returns the world that cleans its global object between
// Calls.
func lockdown(vm *goja.Runtime, orig []goja.Value) (*world, error) {
	v, err := vm.RunProgram(lockdownProgram)
	if err != nil {
		return nil, fmt.Errorf("lockdown: %w", err)
	}
	run, ok := goja.AssertFunction(v)
	if !ok {
		return nil, fmt.Errorf("lockdown: compiled to %v, not a function", v)
	}
	if v, err = run(goja.Undefined(), orig...); err != nil {
		return nil, fmt.Errorf("lockdown: %w", err)
	}
	clean, ok := goja.AssertFunction(v)
	if !ok {
		return nil, fmt.Errorf("lockdown: returned %v, not a function", v)
	}
	w := &world{clean: clean, global: vm.GlobalObject()}
	// The fast check serves only if it counts what the script sees: the
	// keys Reflect.ownKeys lists, and no private fields.
	ownKeys, ok := goja.AssertFunction(orig[0])
	if !ok {
		return nil, fmt.Errorf("lockdown: Reflect.ownKeys is %v, not a function", orig[0])
	}
	keys, err := ownKeys(goja.Undefined(), w.global)
	if err != nil {
		return nil, fmt.Errorf("lockdown: %w", err)
	}
	if base, ok := shapeOf(w.global); ok && base.private == 0 &&
		base.names == len(w.global.GetOwnPropertyNames()) &&
		int64(base.names+base.symbols) == object(keys).Get("length").ToInteger() {
		w.base, w.fast = base, true
	}
	return w, nil
}

// reset deletes the globals the last Call added and reports whether the
// runtime may be reused: false when a global could not be deleted, the
// global object's prototype or extensibility changed, a private field was
// stamped on it, or cleaning failed.
//
// Most Calls add no global, and lockdown made every global it left
// permanent: a global object whose shape (its counts of own keys, its
// prototype, its extensibility) is the one lockdown left has no global
// added, none removed and none changed, so reset answers from the shape
// alone, without listing the keys in script code (which cost a sixth of a
// small Call).
func (w *world) reset() (ok bool) {
	if w.fast {
		if s, ok := shapeOf(w.global); ok && s == w.base {
			return true
		}
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	v, err := w.clean(goja.Undefined())
	if err != nil || !v.ToBoolean() {
		return false
	}
	if w.fast {
		// The globals the Call added are gone; what clean cannot see (a
		// private field stamped on the global object) must be gone too.
		s, ok := shapeOf(w.global)
		return ok && s == w.base
	}
	return true
}
