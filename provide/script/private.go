package script

import (
	"reflect"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
)

// A class's private field can be stamped onto any object, frozen built-ins
// included, where the next call can neither see nor remove it; a call that
// compiles a private name therefore does not leave its runtime for reuse
// (Runtime.recycle). Only source text holds private names — the script's
// own, and what it hands eval and the Function constructors — and goja's
// parser tells them apart from a '#' in a string or a comment: a source
// without '#' is not parsed at all, one with it is looked through for a
// private identifier.

// mayUsePrivateNames reports whether source, a script as eval compiles it,
// holds a private name. A source that does not parse is reported as
// holding one: it cannot run, so nothing is lost but the runtime's reuse.
func mayUsePrivateNames(source string) bool {
	if strings.IndexByte(source, '#') < 0 {
		return false
	}
	tree, err := goja.Parse("eval.js", source)
	if err != nil {
		return true
	}
	return holdsPrivateName(tree)
}

// functionSource is the text a Function constructor compiles for its
// arguments (parameters, then the body), after prefix — "(function
// anonymous(", or its generator or async form — as goja assembles it.
func functionSource(prefix string, args []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	if len(args) > 1 {
		b.WriteString(strings.Join(args[:len(args)-1], ","))
	}
	b.WriteString("\n) {\n")
	if len(args) > 0 {
		b.WriteString(args[len(args)-1])
	}
	b.WriteString("\n})")
	return b.String()
}

var (
	privateIdentifier    = reflect.TypeFor[ast.PrivateIdentifier]()
	privateDotExpression = reflect.TypeFor[ast.PrivateDotExpression]()
	sourceFile           = reflect.TypeFor[file.File]()
)

// holdsPrivateName reports whether the syntax tree under node holds a
// private identifier (a class's #x, this.#x, #x in o). It walks the tree
// by reflection, with a stack of its own (a deeply nested script must not
// deepen the Go stack), and skips the source file each tree points to.
func holdsPrivateName(node any) bool {
	stack := []reflect.Value{reflect.ValueOf(node)}
	seen := map[uintptr]bool{}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				stack = append(stack, v.Elem())
			}
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				continue
			}
			seen[v.Pointer()] = true
			stack = append(stack, v.Elem())
		case reflect.Struct:
			switch v.Type() {
			case privateIdentifier, privateDotExpression:
				return true
			case sourceFile:
				continue
			}
			for i := range v.NumField() {
				stack = append(stack, v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				stack = append(stack, v.Index(i))
			}
		}
	}
	return false
}
