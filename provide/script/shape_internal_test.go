package script

import (
	"testing"
)

// TestFastReset checks the shape comparison that lets reset skip listing
// the globals: it is in use (goja's layout is the expected one), it sees
// every way a script can add to the global object, and what it sees is
// cleaned or the runtime refused.
func TestFastReset(t *testing.T) {
	g := Grants{}.withDefaults()
	c := newCall(g, newLimits(g), nil)
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	if !c.world.fast {
		t.Fatalf("the fast reset is off: goja's object layout is not the one shape.go reads (%+v)", objectLayout())
	}
	tests := []struct {
		name  string
		src   string
		reuse bool // reset keeps the runtime
		same  bool // the shape does not change
	}{
		{name: "nothing", src: `1`, reuse: true, same: true},
		{name: "a read", src: `[typeof Array, globalThis.nope, Object.getOwnPropertyNames(globalThis).length]`, reuse: true, same: true},
		{name: "assignment", src: `globalThis.x = 1`, reuse: true},
		{name: "sloppy assignment", src: `undeclared = 1`, reuse: true},
		{name: "var in indirect eval", src: `(0, eval)("var v = 1; function f() {}")`, reuse: true},
		{name: "hidden configurable", src: `Object.defineProperty(globalThis, "h", {value: 1, configurable: true})`, reuse: true},
		{name: "index key", src: `globalThis[0] = 1`, reuse: true},
		{name: "symbol key", src: `globalThis[Symbol("s")] = 1`, reuse: true},
		{name: "added and deleted", src: `globalThis.y = 1; delete globalThis.y`, reuse: true, same: true},
		{name: "permanent", src: `Object.defineProperty(globalThis, "p", {value: 1})`},
		{name: "permanent symbol", src: `Object.defineProperty(globalThis, Symbol(), {value: 1})`},
		{name: "prototype", src: `Object.setPrototypeOf(globalThis, {inherited: 1})`},
		{name: "not extensible", src: `Object.preventExtensions(globalThis)`},
		{name: "private field stamped", src: `class B { constructor(o) { return o } }; class C extends B { #x = new Array(10); constructor(o) { super(o) } }; new C(globalThis)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCall(g, newLimits(g), nil)
			if err := c.prepare(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.vm.RunString(tc.src); err != nil {
				t.Fatalf("%s: %v", tc.src, err)
			}
			s, ok := shapeOf(c.world.global)
			if !ok {
				t.Fatal("shapeOf failed")
			}
			switch same := s == c.world.base; {
			case tc.same && !same:
				t.Fatalf("shape changed from %+v to %+v", c.world.base, s)
			case !tc.same && same:
				t.Fatalf("shape %+v unchanged: the fast reset would miss it", s)
			}
			if got := c.world.reset(); got != tc.reuse {
				t.Fatalf("reset = %v, want %v", got, tc.reuse)
			}
			if tc.reuse {
				if s, _ := shapeOf(c.world.global); s != c.world.base {
					t.Fatalf("after reset the shape is %+v, want %+v", s, c.world.base)
				}
				v, err := c.vm.RunString(`Reflect.ownKeys(globalThis).length`)
				if err != nil {
					t.Fatal(err)
				}
				if n := v.ToInteger(); n != int64(c.world.base.names+c.world.base.symbols) {
					t.Fatalf("after reset the global object has %d keys, want %d", n, c.world.base.names+c.world.base.symbols)
				}
			}
		})
	}
}
