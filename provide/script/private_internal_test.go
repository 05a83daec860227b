package script

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestPrivateNamesEndTheRuntime: a call that compiles a private name —
// in its own source, or in what it hands eval or a Function constructor —
// is not followed by another in the same runtime, since a private field
// it stamped on a frozen built-in would stay there, unseen and
// unremovable; nor is one that registered a symbol (Symbol.for's
// registry lives as long as the runtime). Other calls keep their runtime.
func TestPrivateNamesEndTheRuntime(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		reused    bool
	}{
		{"plain", `(a) => a + 1`, true},
		{"class field", `(a) => { class A { #x = 1; get() { return this.#x } }; return new A().get() + a }`, false},
		{"eval", `(a) => (0, eval)("class A { #x = 1; get() { return this.#x } }; new A().get()") + a`, false},
		{"Function", `(a) => new Function("class A { #x = 1; get() { return this.#x } }; return new A().get()")() + a`, false},
		{"generator constructor", `(a) => Object.getPrototypeOf(function*(){}).constructor("class A { static #x = 1 }; yield 1")().next().value + a`, false},
		{"a string that holds #", `(a) => "#fff".length + a`, true},
		{"a comment, a template and a regexp with #", `(a) => /* #x */ ` + "`# ${a}`" + `.length + /#y/.source.length - 1`, true},
		{"eval of a string with #", `(a) => (0, eval)("'#x'").length + a - 1`, true},
		{"Function with # in a string", `(a) => new Function("x", "return '#' + x")(a).length + 1`, true},
		{"#x in o", `(a) => { class A { #x; static has(o) { return #x in o } }; return A.has(new A()) ? a + 1 : 0 }`, false},
		{"eval that does not parse", `(a) => { try { (0, eval)("#") } catch (e) {} return a + 1 }`, false},
		{"Symbol.for", `(a) => Symbol.for("k").description.length + a`, false},
		{"a symbol not registered", `(a) => Symbol("k").description.length + a`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Grants{}, &Options{MaxConcurrent: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Call(context.Background(), tc.src, []byte(`1`)); err != nil {
				t.Fatal(err)
			}
			if kept := len(r.idle) == 1; kept != tc.reused {
				t.Fatalf("runtime kept for the next call: %v, want %v", kept, tc.reused)
			}
		})
	}
}

// TestStampedFieldsDoNotAccumulate: calls that each stamp thousands of
// private fields holding arrays onto Object.prototype leave the heap where
// it was (with the runtime reused, each left ~5 MiB behind for good).
func TestStampedFieldsDoNotAccumulate(t *testing.T) {
	r, err := New(Grants{}, &Options{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	src := `(a) => {
		class A { constructor(o) { return o } }
		for (let i = 0; i < a.n; i++) {
			const B = class extends A { #x = new Array(100).fill(1); constructor(o) { super(o) } };
			new B(Object.prototype);
		}
		return a.n }`
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const calls = 30
	var base uint64
	for i := range calls {
		if _, err := r.Call(context.Background(), src, []byte(`{"n":2000}`)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			base = heap()
		}
	}
	if grown := int64(heap()) - int64(base); grown > 64<<20 {
		t.Fatalf("the heap grew %d MiB over %d calls that stamped private fields", grown>>20, calls-1)
	}
}

// TestMayUsePrivateNames: the parser tells a private name from a '#'
// elsewhere, however deep the tree (the walk keeps its own stack).
func TestMayUsePrivateNames(t *testing.T) {
	deep := strings.Repeat("[", 5000) + `"#"` + strings.Repeat("]", 5000)
	deepPrivate := strings.Repeat("[", 5000) + `class { #x }` + strings.Repeat("]", 5000)
	for _, tc := range []struct {
		name, src string
		want      bool
	}{
		{"no #", `1 + 1`, false},
		{"string", `"#x"`, false},
		{"comment", `1 // #x`, false},
		{"field", `(class { #x = 1 })`, true},
		{"method", `(class { #m() {} })`, true},
		{"static", `(class { static #s = 1 })`, true},
		{"access", `(class { #x; f() { return this.#x } })`, true},
		{"brand check", `(class { #x; static f(o) { return #x in o } })`, true},
		{"deep, no private name", deep, false},
		{"deep private name", deepPrivate, true},
		{"does not parse", `#`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayUsePrivateNames(tc.src); got != tc.want {
				t.Fatalf("mayUsePrivateNames = %v, want %v", got, tc.want)
			}
		})
	}
	if got := functionSource("(function anonymous(", []string{"a", "b", "return a + b"}); got != "(function anonymous(a,b\n) {\nreturn a + b\n})" {
		t.Fatalf("functionSource = %q", got)
	}
}
