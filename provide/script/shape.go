package script

import (
	"reflect"
	"sync"

	"github.com/dop251/goja"
)

// shape is what reset compares to tell that a global object is as
// lockdown left it: the counts of its own string keys (in goja's list of
// names and in its map of values), of its own symbols and of its private
// fields, its prototype and its extensibility. lockdown made every global
// it left non-configurable, so none can be removed: with the same counts,
// no key was added either, and with the same prototype and extensibility
// nothing else about the object changed.
type shape struct {
	names, values, symbols, private int
	proto                           uintptr
	extensible                      bool
}

// layout is where goja keeps those fields of an object, found once by
// reflection: goja has no API that counts an object's keys without
// listing them (a string value allocated per key). Reflection reads
// unexported fields without changing them; when goja's layout is not the
// expected one, ok is false and reset lists the keys in script code as it
// always could (TestFastReset fails, so an upgrade of goja that loses the
// fast path is noticed).
type layout struct {
	self                                   int   // Object.self, an objectImpl
	base                                   []int // the baseObject inside the global object's impl
	names, values, symbols, private, proto int   // fields of baseObject
	extensible, symSize                    int   // and orderedMap.size
	impl                                   reflect.Type
	ok                                     bool
}

var objectLayout = sync.OnceValue(func() (l layout) {
	vm := goja.New()
	obj := reflect.TypeOf(goja.Object{})
	self, ok := obj.FieldByName("self")
	if !ok || self.Type.Kind() != reflect.Interface {
		return l
	}
	impl := reflect.ValueOf(vm.GlobalObject()).Elem().FieldByIndex(self.Index).Elem()
	if impl.Kind() != reflect.Pointer || impl.Elem().Kind() != reflect.Struct {
		return l
	}
	base, ok := impl.Elem().Type().FieldByName("baseObject")
	if !ok || base.Type.Kind() != reflect.Struct {
		return l
	}
	field := func(name string, kind reflect.Kind) int {
		f, found := base.Type.FieldByName(name)
		if !found || len(f.Index) != 1 || f.Type.Kind() != kind {
			ok = false
			return 0
		}
		return f.Index[0]
	}
	l.names = field("propNames", reflect.Slice)
	l.values = field("values", reflect.Map)
	l.symbols = field("symValues", reflect.Pointer)
	l.private = field("privateElements", reflect.Map)
	l.proto = field("prototype", reflect.Pointer)
	l.extensible = field("extensible", reflect.Bool)
	if !ok {
		return l
	}
	size, found := base.Type.Field(l.symbols).Type.Elem().FieldByName("size")
	if !found || len(size.Index) != 1 || size.Type.Kind() != reflect.Int {
		return l
	}
	l.self, l.base, l.symSize, l.impl, l.ok = self.Index[0], base.Index, size.Index[0], impl.Type(), true
	return l
})

// shapeOf reads the shape of o, a global object; ok is false when goja's
// layout is not the one objectLayout found.
func shapeOf(o *goja.Object) (s shape, ok bool) {
	l := objectLayout()
	if !l.ok || o == nil {
		return s, false
	}
	impl := reflect.ValueOf(o).Elem().Field(l.self).Elem()
	if !impl.IsValid() || impl.Type() != l.impl || impl.IsNil() {
		return s, false
	}
	b := impl.Elem().FieldByIndex(l.base)
	s.names = b.Field(l.names).Len()
	s.values = b.Field(l.values).Len()
	if sym := b.Field(l.symbols); !sym.IsNil() {
		s.symbols = int(sym.Elem().Field(l.symSize).Int())
	}
	s.private = b.Field(l.private).Len()
	s.proto = b.Field(l.proto).Pointer()
	s.extensible = b.Field(l.extensible).Bool()
	return s, true
}
