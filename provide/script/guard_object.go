package script

import (
	"strings"

	"github.com/dop251/goja"
)

// guardObjects bounds the built-ins that make a value for every element of
// an array-like (Function.prototype.apply, Reflect.apply and construct
// build an argument list) or a string or object per key (Object.keys and
// its kind, Object.assign). Their cost per key is far above a string's one
// byte a character, or a sparse array's nothing.
func (c *call) guardObjects(vm *goja.Runtime, global *goja.Object) {
	fn := object(object(global.Get("Function")).Get("prototype"))
	c.replace(vm, fn, "apply", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if list := arg(args, 1); !nullish(list) && c.checkLength(vm, "Function.prototype.apply", list) < 0 {
			return goja.Undefined()
		}
		return c.invoke(orig, this, args...)
	})
	refl := object(global.Get("Reflect"))
	for name, i := range map[string]int{"apply": 2, "construct": 1} {
		what := "Reflect." + name
		c.replace(vm, refl, name, func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			if list := arg(args, i); isObject(list) && c.checkLength(vm, what, list) < 0 {
				return goja.Undefined()
			}
			return c.invoke(orig, this, args...)
		})
	}

	perKey := func(what string, from int) trapFunc {
		return func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			for i := from; i < len(args); i++ {
				if !c.checkKeys(vm, what, args[i]) {
					return goja.Undefined()
				}
			}
			return c.invoke(orig, this, args...)
		}
	}
	obj := object(global.Get("Object"))
	for _, name := range []string{"keys", "values", "entries", "getOwnPropertyNames", "getOwnPropertyDescriptors"} {
		c.replace(vm, obj, name, perKey("Object."+name, 0))
	}
	c.replace(vm, obj, "assign", perKey("Object.assign", 1))
	c.replace(vm, refl, "ownKeys", perKey("Reflect.ownKeys", 0))
}

// checkKeys bounds a built-in that makes a record per key of v: a string
// has a key per character, an array-like one per index at most. Objects
// whose length only script code can tell are let through: for them the
// work is proportional to keys they already hold. It returns false after
// stopping the call.
func (c *call) checkKeys(vm *goja.Runtime, what string, v goja.Value) bool {
	n, ok := c.lengthOf(vm, v)
	if ok && n > c.lim.records {
		c.tooLarge("%s over %d keys; the limit is %d", what, n, c.lim.records)
		return false
	}
	return true
}

// typedArrays are the typed array constructors and their element sizes.
var typedArrays = map[string]int64{
	"Int8Array": 1, "Uint8Array": 1, "Uint8ClampedArray": 1,
	"Int16Array": 2, "Uint16Array": 2,
	"Int32Array": 4, "Uint32Array": 4, "Float32Array": 4,
	"Float64Array": 8, "BigInt64Array": 8, "BigUint64Array": 8,
}

// guardBuffers bounds ArrayBuffer and the typed arrays, which allocate
// their whole size at construction. Sizes are capped at the element limit
// rather than at the byte budget, so that a view over a buffer never has
// more elements than an array may: Object.keys of a typed array makes a
// string per element.
func (c *call) guardBuffers(vm *goja.Runtime, global, typedArray *goja.Object) {
	c.replaceCtor(vm, global, "ArrayBuffer", func(args []goja.Value) []goja.Value {
		args = append([]goja.Value(nil), args...)
		if len(args) > 0 {
			args[0] = args[0].ToNumber()
			if n := args[0].ToFloat(); n > float64(c.lim.elements) {
				c.tooLarge("an ArrayBuffer of %.0f bytes; the limit is %d", n, c.lim.elements)
			}
		}
		return args
	})
	for name, size := range typedArrays {
		c.replaceCtor(vm, global, name, func(args []goja.Value) []goja.Value {
			args = append([]goja.Value(nil), args...)
			if len(args) == 0 {
				return args
			}
			src, isObj := args[0].(*goja.Object)
			switch {
			case !isObj:
				args[0] = args[0].ToNumber()
				if n := args[0].ToFloat(); n > float64(c.lim.elements) || n*float64(size) > float64(c.lim.memory) {
					c.tooLarge("a %s of %.0f elements; the limit is %d", name, n, c.lim.elements)
				}
			case src.ExportType() == arrayBufferType:
				// A view over an existing buffer allocates nothing.
			default:
				c.checkSource(vm, name, src)
			}
			return args
		})
	}
	c.replace(vm, typedArray, "from", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if !c.checkSource(vm, "TypedArray.from", arg(args, 0)) {
			return goja.Undefined()
		}
		return c.invoke(orig, this, args...)
	})
	// A typed array's join multiplies its separator by up to the element
	// limit, like an array's.
	proto := object(typedArray.Get("prototype"))
	c.replace(vm, proto, "join", func(_ goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		return c.join(vm, this, arg(args, 0), false)
	})
	c.replace(vm, proto, "toLocaleString", func(_ goja.Callable, this goja.Value, _ []goja.Value) goja.Value {
		return c.join(vm, this, goja.Undefined(), true)
	})
}

// guardJSON replaces JSON.stringify with this package's encoder, which
// bounds its output and nesting (goja's own checks cycles by scanning the
// whole path, which is quadratic, and recurses in Go without bound), and
// bounds the reviver walk of JSON.parse the same way.
func (c *call) guardJSON(vm *goja.Runtime, jsn *goja.Object) {
	c.replace(vm, jsn, "stringify", func(_ goja.Callable, _ goja.Value, args []goja.Value) goja.Value {
		return c.stringify(vm, arg(args, 0), arg(args, 1), arg(args, 2))
	})
	c.replace(vm, jsn, "parse", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		text := toStr(vm, arg(args, 0))
		if n := int64(text.Length()); n > c.lim.records {
			return c.tooLarge("JSON.parse of %d characters; the limit is %d", n, c.lim.records)
		}
		if deeperThan(text.String(), maxNesting) {
			c.throwRange(vm, "JSON.parse: nesting deeper than %d levels", maxNesting)
		}
		reviver, ok := goja.AssertFunction(arg(args, 1))
		if !ok {
			return c.invoke(orig, this, text)
		}
		root := vm.NewObject()
		if err := root.Set("", c.invoke(orig, this, text)); err != nil {
			panic(err)
		}
		return c.revive(vm, root, "", reviver)
	})
}

// revive is InternalizeJSONProperty, with its recursion bounded: a reviver
// can graft deeper structures onto the parts not yet walked.
func (c *call) revive(vm *goja.Runtime, holder *goja.Object, name string, reviver goja.Callable) goja.Value {
	c.enter(vm, "JSON.parse")
	defer c.leave()
	val := value(holder.Get(name))
	if o, ok := val.(*goja.Object); ok {
		var keys []string
		if c.isArray(o) {
			n := toLength(o.Get("length"))
			if n > c.lim.elements {
				return c.tooLarge("JSON.parse reviver over a length of %d; the limit is %d elements", n, c.lim.elements)
			}
			keys = make([]string, n)
			for i := range keys {
				keys[i] = itoa(int64(i))
			}
		} else {
			keys = o.Keys()
		}
		for _, k := range keys {
			if c.stopped.Load() {
				return goja.Undefined()
			}
			v := c.revive(vm, o, k, reviver)
			if goja.IsUndefined(v) {
				_ = o.Delete(k) // a failed delete is ignored, as the spec says
			} else {
				_ = o.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
			}
		}
	}
	return c.invoke(reviver, holder, vm.ToValue(name), val)
}

// guardCompilers bounds eval and the Function constructors by the script
// size grant: goja's parser recurses about 1 KiB of goroutine stack per
// nesting level, so a long enough string of "(" would overflow the stack
// and kill the process. Replacing the global eval makes every eval an
// indirect one (global scope): goja recognises a direct eval by the
// identity of the original function.
func (c *call) guardCompilers(vm *goja.Runtime, global, generatorFunction, asyncFunction *goja.Object) {
	c.replace(vm, global, "eval", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if s, ok := arg(args, 0).(goja.String); ok {
			if int64(s.Length()) > c.lim.script {
				return c.tooLarge("eval of %d characters; the limit is %d", s.Length(), c.lim.script)
			}
			if mayUsePrivateNames(s.String()) {
				c.leavesState = true
			}
		}
		return c.invoke(orig, this, args...)
	})
	sources := func(what, prefix string) func(args []goja.Value) []goja.Value {
		return func(args []goja.Value) []goja.Value {
			out := make([]goja.Value, len(args))
			var total int64
			for i, a := range args {
				s := toStr(vm, a)
				out[i] = s
				total += int64(s.Length())
			}
			if total > c.lim.script {
				c.tooLarge("%s of %d characters; the limit is %d", what, total, c.lim.script)
			}
			texts := make([]string, len(out))
			hash := false
			for i, s := range out {
				texts[i] = s.String()
				hash = hash || strings.IndexByte(texts[i], '#') >= 0
			}
			if hash && mayUsePrivateNames(functionSource(prefix, texts)) {
				c.leavesState = true
			}
			return out
		}
	}
	c.replaceCtor(vm, global, "Function", sources("the Function constructor", "(function anonymous("))
	// Not a compiler, but the same rule: Symbol.for adds to a registry that
	// outlives the call (see Runtime.recycle).
	c.replace(vm, object(global.Get("Symbol")), "for", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		c.leavesState = true
		return c.invoke(orig, this, args...)
	})
	holder := vm.NewObject()
	prefixes := map[string]string{"GeneratorFunction": "(function* anonymous(", "AsyncFunction": "(async function anonymous("}
	for name, ctor := range map[string]*goja.Object{"GeneratorFunction": generatorFunction, "AsyncFunction": asyncFunction} {
		// These have no global name; replaceCtor works on a holder and
		// re-points the prototype's constructor, which is how scripts
		// reach them.
		defineKey(holder, name, ctor)
		c.replaceCtor(vm, holder, name, sources("the "+name+" constructor", prefixes[name]))
	}
}
