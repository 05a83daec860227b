package script_test

import (
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/script"
)

func TestCallResults(t *testing.T) {
	r := newRuntime(t, script.Grants{}, nil)
	tests := []jsCase{
		{name: "arrow", src: `(args) => args.a + args.b`, args: `{"a": 2, "b": 3}`, want: `5`},
		{name: "function expression", src: `function (args) { return args.xs.map(x => x * 2) }`, args: `{"xs": [1, 2]}`, want: `[2,4]`},
		{name: "named function", src: `function double(n) { return n * 2 }`, args: `21`, want: `42`},
		{name: "comment at the end", src: `(n) => n + 1 // add one`, args: `1`, want: `2`},
		{name: "statements inside", src: "(a) => {\n  const out = {};\n  for (const k of Object.keys(a)) out[k.toUpperCase()] = a[k];\n  return out;\n}", args: `{"x": 1}`, want: `{"X":1}`},
		{name: "no args is undefined", src: `(a) => a === undefined`, want: `true`},
		{name: "null args", src: `(a) => a === null`, args: `null`, want: `true`},
		{name: "string args", src: `(s) => s.length`, args: `"héllo"`, want: `5`},
		{name: "async function", src: `async (a) => { const v = await Promise.resolve(a); return v * 2 }`, args: `4`, want: `8`},
		{name: "returned promise", src: `(a) => Promise.resolve(a).then(v => [v])`, args: `1`, want: `[1]`},
		{name: "undefined result", src: `() => undefined`, want: `null`},
		{name: "function result", src: `() => () => 1`, want: `null`},
		{name: "symbol result", src: `() => Symbol("s")`, want: `null`},
		{name: "NaN and Infinity", src: `() => [NaN, Infinity, -Infinity]`, want: `[null,null,null]`},
		{name: "numbers as JavaScript writes them", src: `() => [-0, 0.1, 1e21, 1.5e-7, 2**53]`, want: `[0,0.1,1e+21,1.5e-7,9007199254740992]`},
		{name: "undefined members dropped", src: `() => ({a: undefined, b: () => 1, c: Symbol(), d: 1})`, want: `{"d":1}`},
		{name: "holes and undefined in arrays", src: `() => [1, , undefined, () => 1]`, want: `[1,null,null,null]`},
		{name: "Date", src: `() => new Date(0)`, want: `"1970-01-01T00:00:00.000Z"`},
		{name: "toJSON", src: `() => ({toJSON(key) { return "key:" + key }})`, want: `"key:"`},
		{name: "boxed primitives", src: `() => [new Number(1), new String("s"), new Boolean(false)]`, want: `[1,"s",false]`},
		{name: "Map and Set have no own keys", src: `() => [new Map([[1, 2]]), new Set([1])]`, want: `[{},{}]`},
		{name: "escapes", src: `() => "q\" b\\ \n\t\u0001 é 😀"`, want: `"q\" b\\ \n\t\u0001 é 😀"`},
		{name: "lone surrogate", src: `() => "\ud800x"`, want: `"\ud800x"`},
		{name: "key order", src: `() => ({b: 1, a: 2, 1: 3, 0: 4})`, want: `{"0":4,"1":3,"b":1,"a":2}`},
		{name: "getter", src: `() => ({get x() { return 42 }})`, want: `{"x":42}`},
		{name: "the same object twice is not a cycle", src: `() => { const o = {}; return [o, o] }`, want: `[{},{}]`},
		{name: "big args", src: `(a) => a.length`, args: `"` + strings.Repeat("x", 100000) + `"`, want: `100000`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}

func TestCallErrors(t *testing.T) {
	// The longest grant: no case is about time. Under -race the engine
	// runs 20-50x slower; the cases that take it to its stack's limit are
	// in TestCallErrorsAtTheStackLimit.
	r := newRuntime(t, script.Grants{Timeout: raceGrant(30 * time.Second)}, nil)
	const bad = protocol.CodeInvalidArgument
	tests := []jsCase{
		{name: "syntax error", src: `(a) => a +* 2`, code: bad, msg: "syntax error at line 1, column 11: unexpected token"},
		{name: "syntax error on a later line", src: "(a) => {\n  return a a\n}", code: bad, msg: "syntax error at line 2"},
		{name: "unclosed", src: `(a) => {`, code: bad, msg: "the script ends too early"},
		{name: "empty", src: " \n ", code: bad, msg: "the script is empty"},
		{name: "number", src: `42`, code: bad, msg: "must evaluate to a function"},
		{name: "object", src: `({a: 1})`, code: bad, msg: "it evaluated to an object"},
		{name: "string", src: `"x"`, code: bad, msg: "it evaluated to a string"},
		{name: "thrown Error", src: "(a) => {\n  throw new Error('boom')\n}", code: bad, msg: "the function threw: Error: boom (line 2, column "},
		{name: "thrown string", src: `() => { throw "plain" }`, code: bad, msg: "the function threw: plain"},
		{name: "thrown object with a throwing toString", src: `() => { throw {toString() { throw 1 }} }`, code: bad, msg: "whose toString threw"},
		{name: "ReferenceError", src: `() => missing.x`, code: bad, msg: "ReferenceError: 'missing' is not defined (line 1, column 7)"},
		{name: "TypeError", src: `() => null.x`, code: bad, msg: "TypeError"},
		{name: "throw while evaluating the script", src: `(() => { throw new Error("early") })()`, code: bad, msg: "the script failed: Error: early"},
		{name: "rejected promise", src: `async () => { throw new RangeError("no") }`, code: bad, msg: "promise was rejected: RangeError: no"},
		{name: "promise never settles", src: `() => new Promise(() => {})`, code: bad, msg: "never settled"},
		{name: "args not JSON", src: `(a) => a`, args: `{"a":`, code: bad, msg: "the arguments are not valid JSON"},
		{name: "cyclic result", src: `() => { const a = {}; a.self = a; return a }`, code: bad, msg: "circular reference"},
		{name: "cyclic array", src: `() => { const a = [1]; a.push([a]); return a }`, code: bad, msg: "circular"},
		{name: "BigInt result", src: `() => 1n`, code: bad, msg: "BigInt"},
		{name: "nested BigInt", src: `() => ({n: [Object(2n)]})`, code: bad, msg: "BigInt"},
		{name: "toJSON throws", src: `() => ({toJSON() { throw new Error("tj") }})`, code: bad, msg: "encoding the result failed: Error: tj"},
		{name: "syntax error in eval", src: `() => eval("1 +")`, code: bad, msg: "SyntaxError"},
		{name: "thrown by a built-in", src: "() => {\n  return JSON.parse('{')\n}", code: bad, msg: "SyntaxError: expecting property name (line 2, column "},
		{name: "thrown inside eval", src: "() =>\n  eval('null.x')", code: bad, msg: "(line 2, column 7)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}

// TestCallErrorsAtTheStackLimit takes the engine to the end of its stack:
// each case grows a goroutine stack of tens of MiB, 0.3-1.3 s under the
// race detector on an idle machine and more than an 8 s grant beside
// another go test -race (a fresh-clone run's failure), so it runs without
// the detector only (test.sh's "without the race detector" step).
func TestCallErrorsAtTheStackLimit(t *testing.T) {
	testutil.SkipUnderRace(t)
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, nil)
	const bad = protocol.CodeInvalidArgument
	tests := []jsCase{
		{name: "result too deep", src: `() => { let o = 1; for (let i = 0; i < 6000; i++) o = [o]; return o }`, code: bad, msg: "nesting deeper than the engine's stack allows"},
		{name: "stack overflow", src: `() => { const f = () => f() + 1; return f() }`, code: bad, msg: "maximum call stack size"},
		{name: "stack overflow through a built-in", src: `() => { const f = () => [0].map(f); return f() }`, code: bad, msg: "maximum call stack size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}

func TestCallSizeLimits(t *testing.T) {
	r := newRuntime(t, script.Grants{MaxScriptBytes: 100, MaxArgsBytes: 20, MaxResultBytes: 10}, nil)
	tests := []jsCase{
		{name: "script at the limit", src: `(a)=>a` + strings.Repeat(" ", 94), want: `null`},
		{name: "script over the limit", src: `(a)=>a` + strings.Repeat(" ", 95), code: protocol.CodeTooLarge, msg: "the script is 101 bytes; the limit is 100"},
		{name: "args at the limit", src: `(a)=>1`, args: `"` + strings.Repeat("x", 18) + `"`, want: `1`},
		{name: "args over the limit", src: `(a)=>1`, args: `"` + strings.Repeat("x", 19) + `"`, code: protocol.CodeTooLarge, msg: "the arguments are 21 bytes"},
		{name: "result at the limit", src: `()=>"12345678"`, want: `"12345678"`},
		{name: "result over the limit", src: `()=>"123456789"`, code: protocol.CodeTooLarge, msg: "the result is more than 10 bytes of JSON"},
		{name: "huge result stops early", src: `()=>new Array(1e5).fill(1)`, code: protocol.CodeTooLarge, msg: "more than 10 bytes", or: raceOr()},
		{name: "eval over the script limit", src: `()=>eval(" ".repeat(101))`, code: protocol.CodeTooLarge, msg: "eval of 101 characters; the limit is 100"},
		{name: "Function over the script limit", src: `()=>Function("a", " ".repeat(100))`, code: protocol.CodeTooLarge, msg: "the Function constructor of 101 characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}
