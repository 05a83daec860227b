package script

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

var bigIntType = reflect.TypeOf((*big.Int)(nil))

// encoder is SerializeJSONProperty and its helpers from ECMA-262, writing
// into a buffer that may not grow past limit, with the recursion bounded
// by maxNesting and cycles found by a set rather than goja's scan of the
// whole path. One encoder runs JSON.stringify inside a script; another
// encodes a call's result, where its failures become errors of the call.
type encoder struct {
	c        *call
	vm       *goja.Runtime
	buf      []byte
	limit    int
	replacer goja.Callable
	props    []string // the replacer's property list; nil means every key
	gap      string
	indent   string
	path     map[*goja.Object]struct{}
	depth    int
	result   bool
}

// stopEncoding unwinds a JSON.stringify that stopped the call.
type stopEncoding struct{}

// resultError unwinds the result encoder with the call's error.
type resultError struct{ err *handle.CapabilityError }

// stringify is JSON.stringify(v, replacer, space).
func (c *call) stringify(vm *goja.Runtime, v, replacer, space goja.Value) (out goja.Value) {
	e := &encoder{c: c, vm: vm, limit: int(c.lim.units)}
	if r, ok := replacer.(*goja.Object); ok {
		if f, ok := goja.AssertFunction(r); ok {
			e.replacer = f
		} else if c.isArray(r) {
			if e.props = e.propertyList(r); e.props == nil {
				return goja.Undefined()
			}
		}
	}
	if o, ok := space.(*goja.Object); ok {
		switch o.ClassName() {
		case "Number":
			space = space.ToNumber()
		case "String":
			space = toStr(vm, space)
		}
	}
	switch s := space.(type) {
	case goja.String:
		e.gap = s.Substring(0, min(10, s.Length())).String()
	default:
		if k := space.ExportType(); k != nil && (k.Kind() == reflect.Int64 || k.Kind() == reflect.Float64) {
			if n := math.Min(10, math.Trunc(space.ToFloat())); n >= 1 {
				e.gap = strings.Repeat(" ", int(n))
			}
		}
	}
	defer func() {
		if x := recover(); x != nil {
			if _, ok := x.(stopEncoding); !ok {
				panic(x)
			}
			out = goja.Undefined()
		}
	}()
	if !e.property(e.wrapper(v), "", v) {
		return goja.Undefined()
	}
	return vm.ToValue(string(e.buf))
}

// propertyList is the property list of a replacer array: its strings and
// numbers, as strings, without repeats. It returns nil after stopping the
// call.
func (e *encoder) propertyList(r *goja.Object) []string {
	n := toLength(r.Get("length"))
	if n > e.c.lim.elements {
		e.c.tooLarge("JSON.stringify replacer of length %d; the limit is %d elements", n, e.c.lim.elements)
		return nil
	}
	list := []string{}
	seen := make(map[string]bool)
	for i := int64(0); i < n; i++ {
		item := value(r.Get(itoa(i)))
		var name string
		switch it := item.(type) {
		case goja.String:
			name = it.String()
		case *goja.Object:
			if k := it.ClassName(); k != "String" && k != "Number" {
				continue
			}
			name = toStr(e.vm, it).String()
		default:
			if k := item.ExportType(); k == nil || k.Kind() != reflect.Int64 && k.Kind() != reflect.Float64 {
				continue
			}
			name = item.String()
		}
		if !seen[name] {
			seen[name] = true
			list = append(list, name)
		}
	}
	return list
}

// encodeResult encodes a call's result. A top-level undefined, function or
// symbol, which JSON.stringify would turn into undefined, becomes null.
func (c *call) encodeResult(vm *goja.Runtime, v goja.Value) (out json.RawMessage, err *handle.CapabilityError) {
	e := &encoder{c: c, vm: vm, limit: c.grants.MaxResultBytes, result: true}
	var ok bool
	func() {
		defer func() {
			if x := recover(); x != nil {
				re, is := x.(resultError)
				if !is {
					panic(x)
				}
				err = re.err
			}
		}()
		if ex := vm.Try(func() { ok = e.property(e.wrapper(v), "", v) }); ex != nil {
			err = c.scriptError(ex, "encoding the result failed")
		}
	}()
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return json.RawMessage("null"), nil
	}
	return e.buf, nil
}

// wrapper is the holder {"": v} that toJSON and the replacer see for the
// top-level value.
func (e *encoder) wrapper(v goja.Value) *goja.Object {
	w := e.vm.NewObject()
	if err := w.Set("", v); err != nil {
		panic(err)
	}
	return w
}

// fail reports a value JSON cannot hold: a TypeError or RangeError inside
// JSON.stringify, an invalid_argument error for a result.
func (e *encoder) fail(rangeErr bool, format string, args ...any) {
	if e.result {
		panic(resultError{fail("the result cannot be encoded as JSON: "+format, args...)})
	}
	if rangeErr {
		e.c.throwRange(e.vm, format, args...)
	}
	e.c.throwType(e.vm, format, args...)
}

// full stops the encoding at the size limit.
func (e *encoder) full() {
	if e.result {
		panic(resultError{handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
			"the result is more than %d bytes of JSON", e.limit)})
	}
	e.c.tooLarge("JSON.stringify would build a string of more than %d characters", e.limit)
	panic(stopEncoding{})
}

func (e *encoder) write(s string) {
	e.buf = append(e.buf, s...)
	if len(e.buf) > e.limit {
		e.full()
	}
}

func (e *encoder) checkStop() {
	if e.c.stopped.Load() {
		if e.result {
			panic(resultError{e.c.reason()})
		}
		panic(stopEncoding{})
	}
}

// property is SerializeJSONProperty for holder[key], whose value v the
// caller has read. It reports false when the value is not serialized
// (undefined, a function, a symbol).
func (e *encoder) property(holder *goja.Object, key string, v goja.Value) bool {
	v = value(v)
	if _, isObj := v.(*goja.Object); isObj || v.ExportType() == bigIntType {
		if f, ok := goja.AssertFunction(v.ToObject(e.vm).Get("toJSON")); ok {
			v = value(e.c.invoke(f, v, e.vm.ToValue(key)))
		}
	}
	if e.replacer != nil {
		v = value(e.c.invoke(e.replacer, holder, e.vm.ToValue(key), v))
	}
	if o, ok := v.(*goja.Object); ok {
		switch o.ClassName() {
		case "Number":
			v = v.ToNumber()
		case "String":
			v = toStr(e.vm, v)
		case "Boolean":
			v = e.vm.ToValue(o.Export())
		default:
			if o.ExportType() == bigIntType { // a BigInt object
				e.fail(false, "Do not know how to serialize a BigInt")
			}
		}
	}
	switch t := v.(type) {
	case goja.String:
		e.quote(t)
		return true
	case *goja.Symbol:
		return false
	case *goja.Object:
		if _, callable := goja.AssertFunction(t); callable {
			return false
		}
		e.enter(t)
		if e.c.isArray(t) {
			e.array(t)
		} else {
			e.object(t)
		}
		e.leave(t)
		return true
	}
	switch {
	case goja.IsUndefined(v):
		return false
	case goja.IsNull(v):
		e.write("null")
		return true
	}
	switch v.ExportType().Kind() {
	case reflect.Bool:
		if v.ToBoolean() {
			e.write("true")
		} else {
			e.write("false")
		}
	case reflect.Int64, reflect.Float64:
		if f := v.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			e.write("null")
		} else {
			e.write(v.String()) // Number::toString, as JSON.stringify writes numbers
		}
	default:
		e.fail(false, "Do not know how to serialize a BigInt")
	}
	return true
}

// enter and leave track the objects on the current path.
func (e *encoder) enter(o *goja.Object) {
	if _, cyclic := e.path[o]; cyclic {
		e.fail(false, "Converting circular structure to JSON")
	}
	if e.depth >= maxNesting {
		e.fail(true, "nesting deeper than %d levels", maxNesting)
	}
	if e.path == nil {
		e.path = make(map[*goja.Object]struct{})
	}
	e.path[o] = struct{}{}
	e.depth++
}

func (e *encoder) leave(o *goja.Object) {
	delete(e.path, o)
	e.depth--
}

func (e *encoder) object(o *goja.Object) {
	keys := e.props
	if keys == nil {
		keys = o.Keys()
	}
	stepback := e.indent
	e.indent += e.gap
	e.write("{")
	empty := true
	for _, k := range keys {
		e.checkStop()
		mark := len(e.buf)
		if !empty {
			e.write(",")
		}
		if e.gap != "" {
			e.write("\n")
			e.write(e.indent)
		}
		e.quoteGo(k)
		e.write(":")
		if e.gap != "" {
			e.write(" ")
		}
		if !e.property(o, k, o.Get(k)) {
			e.buf = e.buf[:mark]
			continue
		}
		empty = false
	}
	if !empty && e.gap != "" {
		e.write("\n")
		e.write(stepback)
	}
	e.write("}")
	e.indent = stepback
}

func (e *encoder) array(o *goja.Object) {
	n := toLength(o.Get("length"))
	stepback := e.indent
	e.indent += e.gap
	e.write("[")
	for i := int64(0); i < n; i++ {
		if i&1023 == 0 {
			e.checkStop()
		}
		if i > 0 {
			e.write(",")
		}
		if e.gap != "" {
			e.write("\n")
			e.write(e.indent)
		}
		k := itoa(i)
		if !e.property(o, k, o.Get(k)) {
			e.write("null")
		}
	}
	if n > 0 && e.gap != "" {
		e.write("\n")
		e.write(stepback)
	}
	e.write("]")
	e.indent = stepback
}

const hexDigits = "0123456789abcdef"

// quote is QuoteJSONString over UTF-16 code units: lone surrogates are
// escaped, as JSON.stringify does since ES2019, so the output is valid
// UTF-8.
func (e *encoder) quote(s goja.String) {
	str := s.String()
	if len(str) == s.Length() { // ASCII: UTF-8 and UTF-16 lengths agree
		e.quoteGo(str)
		return
	}
	e.buf = append(e.buf, '"')
	n := s.Length()
	for i := 0; i < n; i++ {
		u := s.CharAt(i)
		switch {
		case u < utf8.RuneSelf:
			e.buf = appendASCII(e.buf, byte(u))
		case utf16.IsSurrogate(rune(u)):
			if u < 0xdc00 && i+1 < n {
				if next := s.CharAt(i + 1); next >= 0xdc00 && next <= 0xdfff {
					e.buf = utf8.AppendRune(e.buf, utf16.DecodeRune(rune(u), rune(next)))
					i++
					break
				}
			}
			e.buf = append(e.buf, '\\', 'u', hexDigits[u>>12], hexDigits[u>>8&0xf], hexDigits[u>>4&0xf], hexDigits[u&0xf])
		default:
			e.buf = utf8.AppendRune(e.buf, rune(u))
		}
		if len(e.buf) > e.limit {
			e.full()
		}
	}
	e.write(`"`)
}

// quoteGo quotes a Go string (an ASCII string, or a property key).
func (e *encoder) quoteGo(s string) {
	e.buf = append(e.buf, '"')
	for i := 0; i < len(s); i++ {
		e.buf = appendASCII(e.buf, s[i])
	}
	e.write(`"`)
}

// appendASCII appends b escaped for a JSON string; bytes at or above 0x80
// (parts of UTF-8 sequences) pass through.
func appendASCII(buf []byte, b byte) []byte {
	switch b {
	case '"':
		return append(buf, '\\', '"')
	case '\\':
		return append(buf, '\\', '\\')
	case '\b':
		return append(buf, '\\', 'b')
	case '\f':
		return append(buf, '\\', 'f')
	case '\n':
		return append(buf, '\\', 'n')
	case '\r':
		return append(buf, '\\', 'r')
	case '\t':
		return append(buf, '\\', 't')
	}
	if b < 0x20 {
		return append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
	}
	return append(buf, b)
}

// deeperThan reports whether JSON text nests arrays and objects more than
// limit levels deep, without parsing it: brackets inside strings do not
// count. goja's JSON.parse recurses in Go once per level with no bound of
// its own, so text of a few megabytes of "[" would overflow the goroutine
// stack, which kills the process. Invalid text gets some answer; the
// parser rejects it afterwards.
func deeperThan(s string, limit int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}
