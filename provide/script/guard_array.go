package script

import (
	"math"

	"github.com/dop251/goja"
)

// guardArrays bounds the Array built-ins. Every method of Array.prototype
// walks its receiver index by index up to its length in Go code, which
// interrupts cannot stop, and a length costs nothing to fake
// (Array(2**32-1), {length: 2**53-1}); several then allocate a slot per
// index. So each method first checks the receiver's length against the
// element limit, reading it without running script code (see lengthOf).
//
// join, toLocaleString, flat and flatMap are written here instead: their
// output is not bounded by their receiver's length (a join of an array
// holding one long string many times, a flat of nested arrays that share
// their elements), so only a loop that counts as it goes can bound it.
// The array and string iterators are wrapped so that a spread or Array.from
// over a huge sparse array, whose loop runs in Go, notices a stopped call.
func (c *call) guardArrays(vm *goja.Runtime, global, arrayIterator, stringIterator *goja.Object) {
	arr := object(global.Get("Array"))
	proto := object(arr.Get("prototype"))
	own := map[string]trapFunc{
		"join": func(_ goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			return c.join(vm, this, arg(args, 0), false)
		},
		"toLocaleString": func(_ goja.Callable, this goja.Value, _ []goja.Value) goja.Value {
			return c.join(vm, this, goja.Undefined(), true)
		},
		"flat": func(_ goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			return c.flat(vm, this, args, false)
		},
		"flatMap": func(_ goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			return c.flat(vm, this, args, true)
		},
		"concat": func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			total := c.checkLength(vm, "Array.prototype.concat", this)
			for _, a := range args {
				if o, ok := a.(*goja.Object); ok && total >= 0 {
					n := c.checkLength(vm, "Array.prototype.concat", o)
					if n < 0 || total+n > c.lim.elements {
						return c.tooLarge("Array.prototype.concat would build %d elements; the limit is %d", total+n, c.lim.elements)
					}
					total += n
				}
			}
			if total < 0 {
				return goja.Undefined()
			}
			return c.invoke(orig, this, args...)
		},
		"with": func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			// with converts its index before it reads the length: convert
			// it here, so that a valueOf cannot grow the array after the
			// check.
			args = append([]goja.Value(nil), args...)
			if len(args) > 0 {
				args[0] = args[0].ToNumber()
			}
			if c.checkLength(vm, "Array.prototype.with", this) < 0 {
				return goja.Undefined()
			}
			return c.invoke(orig, this, args...)
		},
	}
	// keys, values and entries only make an iterator; the iterator's next
	// is guarded below. toString calls join.
	skip := map[string]bool{"constructor": true, "keys": true, "values": true, "entries": true, "toString": true}
	for _, name := range proto.GetOwnPropertyNames() {
		if skip[name] {
			continue
		}
		if trap, ok := own[name]; ok {
			c.replace(vm, proto, name, trap)
			continue
		}
		if _, ok := goja.AssertFunction(proto.Get(name)); !ok {
			continue
		}
		what := "Array.prototype." + name
		c.replace(vm, proto, name, func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			if c.checkLength(vm, what, this) < 0 {
				return goja.Undefined()
			}
			return c.invoke(orig, this, args...)
		})
	}

	c.replace(vm, arr, "from", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if !c.checkSource(vm, "Array.from", arg(args, 0)) {
			return goja.Undefined()
		}
		return c.invoke(orig, this, args...)
	})

	pass := func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		return c.invoke(orig, this, args...)
	}
	c.replace(vm, arrayIterator, "next", pass)
	c.replace(vm, stringIterator, "next", pass)
}

// checkLength returns the length of the array-like v, or -1 after stopping
// the call when it is beyond the element limit. It throws a TypeError when
// the length cannot be read without running script code.
func (c *call) checkLength(vm *goja.Runtime, what string, v goja.Value) int64 {
	n, ok := c.lengthOf(vm, v)
	if !ok {
		c.throwType(vm, "%s: this runtime does not run it on an object whose length is computed by script code (a getter, a Proxy, or an object with valueOf)", what)
	}
	if n > c.lim.elements {
		c.tooLarge("%s on a length of %d; the limit is %d elements", what, n, c.lim.elements)
		return -1
	}
	return n
}

// checkSource bounds a built-in that makes one value per element of an
// array-like or per character of a string (Array.from, the typed array
// constructors). It returns false after stopping the call.
func (c *call) checkSource(vm *goja.Runtime, what string, v goja.Value) bool {
	if s, ok := v.(goja.String); ok {
		if n := int64(s.Length()); n > c.lim.records {
			c.tooLarge("%s over a string of %d characters; the limit is %d", what, n, c.lim.records)
			return false
		}
		return true
	}
	if _, ok := v.(*goja.Object); !ok {
		return true
	}
	return c.checkLength(vm, what, v) >= 0
}

// join is Array.prototype.join (and, with locale, toLocaleString) with its
// output bounded as it is built. An array that contains itself joins to
// "" at the repetition, as engines do.
func (c *call) join(vm *goja.Runtime, this, sep goja.Value, locale bool) goja.Value {
	what := "Array.prototype.join"
	if locale {
		what = "Array.prototype.toLocaleString"
	}
	o := this.ToObject(vm)
	if _, busy := c.joining[o]; busy {
		return vm.ToValue("")
	}
	n := toLength(o.Get("length"))
	if n > c.lim.elements {
		return c.tooLarge("%s on a length of %d; the limit is %d elements", what, n, c.lim.elements)
	}
	var separator goja.String = vm.ToValue(",").(goja.String)
	if !locale && !goja.IsUndefined(sep) {
		separator = toStr(vm, sep)
	}
	sepLen := int64(separator.Length())
	if n > 1 && float64(n-1)*float64(sepLen) > float64(c.lim.units) {
		return c.tooLarge("%s would build a string of more than %d characters", what, c.lim.units)
	}
	c.enter(vm, what)
	defer c.leave()
	if c.joining == nil {
		c.joining = make(map[*goja.Object]struct{})
	}
	c.joining[o] = struct{}{}
	defer delete(c.joining, o)

	var b goja.StringBuilder
	var total int64
	for i := int64(0); i < n; i++ {
		if i&1023 == 0 && c.stopped.Load() {
			return goja.Undefined()
		}
		if i > 0 {
			b.WriteString(separator)
			total += sepLen
		}
		e := o.Get(itoa(i))
		if nullish(e) {
			continue
		}
		var s goja.String
		if locale {
			m := e.ToObject(vm).Get("toLocaleString")
			f, ok := goja.AssertFunction(m)
			if !ok {
				c.throwType(vm, "toLocaleString is not a function")
			}
			s = toStr(vm, c.invoke(f, e))
		} else {
			s = toStr(vm, e)
		}
		if total += int64(s.Length()); total > c.lim.units {
			return c.tooLarge("%s would build a string of more than %d characters", what, c.lim.units)
		}
		b.WriteString(s)
	}
	return b.String()
}

// flat is Array.prototype.flat and, with mapped, flatMap, with the output
// counted as it is built and the recursion bounded. Unlike the original it
// always builds a plain Array, ignoring Symbol.species.
func (c *call) flat(vm *goja.Runtime, this goja.Value, args []goja.Value, mapped bool) goja.Value {
	o := this.ToObject(vm)
	n := toLength(o.Get("length"))
	depth := 1.0
	var mapper goja.Callable
	var thisArg goja.Value
	if mapped {
		f, ok := goja.AssertFunction(arg(args, 0))
		if !ok {
			c.throwType(vm, "flatMap mapper function is not callable")
		}
		mapper, thisArg = f, arg(args, 1)
	} else if d := arg(args, 0); !goja.IsUndefined(d) {
		depth = math.Trunc(d.ToNumber().ToFloat())
		if math.IsNaN(depth) || depth < 0 {
			depth = 0
		}
	}
	var out []any
	if !c.flatten(vm, &out, o, n, depth, mapper, thisArg) {
		return goja.Undefined()
	}
	return vm.NewArray(out...)
}

// flatten is FlattenIntoArray. It returns false after stopping the call.
func (c *call) flatten(vm *goja.Runtime, out *[]any, src *goja.Object, n int64, depth float64, mapper goja.Callable, thisArg goja.Value) bool {
	if n > c.lim.elements {
		c.tooLarge("Array.prototype.flat over a length of %d; the limit is %d elements", n, c.lim.elements)
		return false
	}
	c.enter(vm, "Array.prototype.flat")
	defer c.leave()
	proxy := src.ExportType() == proxyType
	for i := int64(0); i < n; i++ {
		if i&1023 == 0 && c.stopped.Load() {
			return false
		}
		key := itoa(i)
		if proxy && !c.invoke(c.in.has, goja.Undefined(), src, vm.ToValue(key)).ToBoolean() {
			continue
		}
		e := src.Get(key)
		if e == nil { // absent: a hole
			continue
		}
		if mapper != nil {
			e = c.invoke(mapper, thisArg, e, vm.ToValue(i), src)
		}
		if depth > 0 && c.isArray(e) {
			inner := e.(*goja.Object)
			if !c.flatten(vm, out, inner, toLength(inner.Get("length")), depth-1, nil, nil) {
				return false
			}
			continue
		}
		if int64(len(*out)) >= c.lim.elements {
			c.tooLarge("Array.prototype.flat would build more than %d elements", c.lim.elements)
			return false
		}
		*out = append(*out, e)
	}
	return true
}
