package script

import (
	"math"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// guardStrings bounds the String and RegExp built-ins whose output can be
// far larger than their input in one step: repeat and padding build a
// string of a requested size at once, concat, raw and replace join many
// pieces, and split and the regular expression methods that collect every
// match hold 100 to 250 bytes per match (measured) until they return.
//
// Each guard converts the arguments to primitives itself, checks the size
// the result can reach, and passes the primitives on, so that no script
// code (a toString, a valueOf) runs between the check and the work.
func (c *call) guardStrings(vm *goja.Runtime, global *goja.Object) {
	str := object(global.Get("String"))
	proto := object(str.Get("prototype"))

	c.replace(vm, proto, "repeat", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if nullish(this) {
			return c.invoke(orig, this, args...) // throws
		}
		s := toStr(vm, this)
		count := arg(args, 0).ToNumber()
		if n := math.Trunc(count.ToFloat()); s.Length() > 0 && n >= 1 && !math.IsInf(n, 1) {
			if size := float64(s.Length()) * n; size > float64(c.lim.units) {
				return c.tooLarge("String.prototype.repeat would build a string of %.0f characters; the limit is %d", size, c.lim.units)
			}
		}
		return c.invoke(orig, s, count)
	})

	pad := func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if nullish(this) {
			return c.invoke(orig, this, args...)
		}
		s := toStr(vm, this)
		maxLength := arg(args, 0).ToNumber()
		var fill goja.Value = goja.Undefined()
		if f := arg(args, 1); !goja.IsUndefined(f) {
			fill = toStr(vm, f)
		}
		n := lengthOfFloat(maxLength.ToFloat())
		padded := n > int64(s.Length()) && (goja.IsUndefined(fill) || fill.(goja.String).Length() > 0)
		if padded && n > c.lim.units {
			return c.tooLarge("padding would build a string of %d characters; the limit is %d", n, c.lim.units)
		}
		return c.invoke(orig, s, maxLength, fill)
	}
	c.replace(vm, proto, "padStart", pad)
	c.replace(vm, proto, "padEnd", pad)

	c.replace(vm, proto, "concat", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if nullish(this) {
			return c.invoke(orig, this, args...)
		}
		s := toStr(vm, this)
		total := int64(s.Length())
		parts := make([]goja.Value, len(args))
		for i, a := range args {
			p := toStr(vm, a)
			parts[i] = p
			total += int64(p.Length())
		}
		if total > c.lim.units {
			return c.tooLarge("String.prototype.concat would build a string of %d characters; the limit is %d", total, c.lim.units)
		}
		return c.invoke(orig, s, parts...)
	})

	replaceString := func(all bool) trapFunc {
		return func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			pattern, with := arg(args, 0), arg(args, 1)
			if nullish(this) || isObject(pattern) {
				// An object pattern delegates to its Symbol.replace: for a
				// RegExp, the guarded one below.
				return c.invoke(orig, this, args...)
			}
			s := toStr(vm, this)
			p := toStr(vm, pattern)
			matches := occurrences(s, p)
			if !all {
				matches = min(matches, 1)
			}
			if fn, ok := with.(*goja.Object); ok {
				if _, callable := goja.AssertFunction(fn); callable {
					return c.invoke(orig, s, p, c.countReplacer(vm, fn, int64(s.Length())))
				}
			}
			r := toStr(vm, with)
			size := replaceBound(r.String(), int64(s.Length()), matches, int64(p.Length()), false)
			if size > float64(c.lim.units) {
				return c.tooLarge("replacing would build a string of up to %.0f characters; the limit is %d", size, c.lim.units)
			}
			return c.invoke(orig, s, p, r)
		}
	}
	c.replace(vm, proto, "replace", replaceString(false))
	c.replace(vm, proto, "replaceAll", replaceString(true))

	c.replace(vm, proto, "split", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		sep, limit := arg(args, 0), arg(args, 1)
		if nullish(this) || isObject(sep) {
			return c.invoke(orig, this, args...) // a RegExp: its guarded Symbol.split
		}
		s := toStr(vm, this)
		lim := limit
		pieces := int64(math.MaxUint32)
		if !goja.IsUndefined(limit) {
			lim = limit.ToNumber()
			pieces = int64(toUint32(lim.ToFloat()))
		}
		if goja.IsUndefined(sep) {
			return c.invoke(orig, s, sep, lim)
		}
		p := toStr(vm, sep)
		if n := occurrences(s, p) + 1; n < pieces {
			pieces = n
		}
		if p.Length() == 0 {
			pieces = min(pieces, int64(s.Length()))
		}
		if pieces > c.lim.records {
			return c.tooLarge("String.prototype.split would make %d strings; the limit is %d", pieces, c.lim.records)
		}
		return c.invoke(orig, s, p, lim)
	})

	// String.raw is written here rather than wrapped: its pieces come from
	// an array-like the script controls, so only a loop that counts as it
	// goes can bound it.
	c.replace(vm, str, "raw", func(_ goja.Callable, _ goja.Value, args []goja.Value) goja.Value {
		cooked := arg(args, 0).ToObject(vm)
		literals := value(cooked.Get("raw")).ToObject(vm)
		n := toLength(literals.Get("length"))
		if n > c.lim.elements {
			return c.tooLarge("String.raw over %d pieces; the limit is %d", n, c.lim.elements)
		}
		var b goja.StringBuilder
		var total int64
		add := func(s goja.String) bool {
			if total += int64(s.Length()); total > c.lim.units {
				c.tooLarge("String.raw would build a string of more than %d characters", c.lim.units)
				return false
			}
			b.WriteString(s)
			return true
		}
		for i := int64(0); i < n; i++ {
			if c.stopped.Load() || !add(toStr(vm, value(literals.Get(itoa(i))))) {
				return goja.Undefined()
			}
			if i+1 == n {
				break
			}
			if sub := int(i) + 1; sub < len(args) && !add(toStr(vm, args[sub])) {
				return goja.Undefined()
			}
		}
		return b.String()
	})

	// A pattern is code: compiling one costs 20 bytes and more a
	// character in Go, so patterns share the script's size limit. Strings
	// become patterns through the RegExp constructor, compile, and the
	// String methods that take a pattern.
	pattern := func(what string, v goja.Value) (goja.Value, bool) {
		if o, ok := v.(*goja.Object); ok && o.ClassName() == "RegExp" || goja.IsUndefined(v) {
			return v, true
		}
		p := toStr(vm, v)
		if n := int64(p.Length()); n > c.lim.script {
			c.tooLarge("%s: a regular expression of %d characters; the limit is %d", what, n, c.lim.script)
			return nil, false
		}
		return p, true
	}
	patternFirst := func(what string) func(args []goja.Value) []goja.Value {
		return func(args []goja.Value) []goja.Value {
			args = append([]goja.Value(nil), args...)
			if len(args) > 0 {
				if p, ok := pattern(what, args[0]); ok {
					args[0] = p
				}
			}
			return args
		}
	}
	c.replaceCtor(vm, global, "RegExp", patternFirst("RegExp"))
	re := object(object(global.Get("RegExp")).Get("prototype"))
	for _, name := range []string{"match", "matchAll", "search"} {
		check := patternFirst("String.prototype." + name)
		c.replace(vm, proto, name, func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			if args = check(args); c.stopped.Load() {
				return goja.Undefined()
			}
			return c.invoke(orig, this, args...)
		})
	}
	compile := patternFirst("RegExp.prototype.compile")
	c.replace(vm, re, "compile", func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		if args = compile(args); c.stopped.Load() {
			return goja.Undefined()
		}
		return c.invoke(orig, this, args...)
	})
	subject := func(what string, s goja.String) bool {
		if n := int64(s.Length()); n > c.lim.records {
			c.tooLarge("%s on a string of %d characters; the limit for regular expressions that collect every match is %d", what, n, c.lim.records)
			return false
		}
		return true
	}
	c.replace(vm, re, goja.SymReplace, func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		s := toStr(vm, arg(args, 0))
		if !subject("replace", s) {
			return goja.Undefined()
		}
		with := arg(args, 1)
		if fn, ok := with.(*goja.Object); ok {
			if _, callable := goja.AssertFunction(fn); callable {
				return c.invoke(orig, this, s, c.countReplacer(vm, fn, int64(s.Length())))
			}
		}
		r := toStr(vm, with)
		n := int64(s.Length())
		if size := replaceBound(r.String(), n, n+1, -1, true); size > float64(c.lim.units) {
			return c.tooLarge("replacing would build a string of up to %.0f characters; the limit is %d", size, c.lim.units)
		}
		return c.invoke(orig, this, s, r)
	})
	for _, m := range []struct {
		sym  *goja.Symbol
		name string
	}{{goja.SymSplit, "split"}, {goja.SymMatch, "match"}, {goja.SymMatchAll, "matchAll"}} {
		c.replace(vm, re, m.sym, func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
			s := toStr(vm, arg(args, 0))
			if !subject(m.name, s) {
				return goja.Undefined()
			}
			rest := append([]goja.Value{s}, args[min(1, len(args)):]...)
			return c.invoke(orig, this, rest...)
		})
	}
}

// countReplacer wraps a replacement function so that the pieces it
// returns are counted against the string limit as the built-in asks for
// them; base is the length of the subject, which the result also holds.
func (c *call) countReplacer(vm *goja.Runtime, fn *goja.Object, base int64) goja.Value {
	call := function(fn)
	total := base
	return vm.ToValue(vm.NewProxy(fn, &goja.ProxyTrapConfig{
		Apply: func(_ *goja.Object, this goja.Value, args []goja.Value) goja.Value {
			if c.stopped.Load() {
				return goja.Undefined()
			}
			s := toStr(vm, c.invoke(call, this, args...))
			if total += int64(s.Length()); total > c.lim.units {
				return c.tooLarge("replacing would build a string of more than %d characters", c.lim.units)
			}
			return s
		},
	}))
}

// replaceBound is an upper bound, in code units, of the result of
// replacing matches matches (each matchLen long; -1 when unknown) in a
// subject of n units with the replacement template r. "$&" and "$1" insert
// at most the subject's length over all matches together, since matches do
// not overlap; "$`" and "$'" insert up to n for every match. For a string
// pattern "$1" is literal text.
func replaceBound(r string, n, matches, matchLen int64, regexp bool) float64 {
	var whole, each float64 // units inserted in total, and per match
	each = float64(len(r))
	for i := 0; i+1 < len(r); i++ {
		if r[i] != '$' {
			continue
		}
		switch d := r[i+1]; {
		case d == '&':
			if matchLen >= 0 {
				each += float64(matchLen)
			} else {
				whole += float64(n)
			}
		case d == '`' || d == '\'':
			each += float64(n)
		case regexp && (d >= '0' && d <= '9' || d == '<'):
			// A capture inside a lookahead can reach past its match, so
			// this bound does not hold for it; see docs/handle-js.md.
			whole += float64(n)
		}
		i++
	}
	return float64(n) + whole + float64(matches)*each
}

// occurrences counts the non-overlapping occurrences of p in s, as
// replaceAll and split find them; an empty p occurs at every position.
func occurrences(s, p goja.String) int64 {
	if p.Length() == 0 {
		return int64(s.Length()) + 1
	}
	// The UTF-8 forms match where the UTF-16 forms do, lone surrogates
	// aside, which this count may only overestimate.
	return int64(strings.Count(s.String(), p.String()))
}

func toUint32(f float64) uint32 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return uint32(int64(math.Mod(math.Trunc(f), 1<<32)))
}

func isObject(v goja.Value) bool {
	_, ok := v.(*goja.Object)
	return ok
}

// value turns the nil of an absent property into undefined.
func value(v goja.Value) goja.Value {
	if v == nil {
		return goja.Undefined()
	}
	return v
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
