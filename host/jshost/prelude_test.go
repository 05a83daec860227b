package jshost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/tool"
)

// spreadTool runs the body of a case as a function of show (an array as
// text: holes as _, an array longer than 100 as <its length>), m (40,000
// holes but m[5] = "a" and m[39999] = "b") and big (70,000 holes but
// big[3] = [1, [2]]), and returns what it returns as a string.
const spreadTool = register + `
const show = (v) => {
  if (!Array.isArray(v)) return typeof v === "string" ? v : String(v);
  if (v.length > 100) return "<" + v.length + ">";
  let s = "[";
  for (let i = 0; i < v.length; i++) s += (i ? "," : "") + (i in v ? show(v[i]) : "_");
  return s + "]";
};
register({ name: "t.spread", requires: [], run(ctx, input) {
  const m = []; m.length = 40000; m[5] = "a"; m[39999] = "b";
  const big = []; big.length = 70000; big[3] = [1, [2]];
  try {
    return String(new Function("show", "m", "big", input.src)(show, m, big));
  } catch (e) {
    return "threw " + e.name + ": " + e.message;
  }
} });`

// TestSpreadingMethods: flat, flatMap and concat, which the prelude
// wraps so that their loops in C stop at the deadline, do what the
// built-ins do. Each case runs in a realm of the default memory limit,
// where all its arrays are within the bound and go in as they are, and
// in one of 1 MiB (65,536 elements), where m twice, big and what nests
// them go in as Proxies: the outcome is the same. The expected values
// are the built-ins' (QuickJS's, which follow the specification),
// checked against them where the old wrappers ran them as they are; the
// old wrappers differed in flatMap's third argument, the count of reads
// of Symbol.isConcatSpreadable and a setter on Array.prototype, where
// these cases hold the specification's.
func TestSpreadingMethods(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		// flat
		{"flat", `return show([1, [2, [3, [4]]]].flat())`, "[1,2,[3,[4]]]"},
		{"flat 0", `return show([1, [2, [3, [4]]]].flat(0))`, "[1,[2,[3,[4]]]]"},
		{"flat 2", `return show([1, [2, [3, [4]]]].flat(2))`, "[1,2,3,[4]]"},
		{"flat Infinity", `return show([1, [2, [3, [4]]]].flat(Infinity))`, "[1,2,3,4]"},
		{"flat depths converted", `const a = [1, [2, [3]]];
		  return [-1, NaN, null, "2", 1.9, undefined, { valueOf: () => 2 }, 2 ** 40].map((d) => show(a.flat(d))).join(" ")`,
			"[1,[2,[3]]] [1,[2,[3]]] [1,[2,[3]]] [1,2,3] [1,2,[3]] [1,2,[3]] [1,2,3] [1,2,3]"},
		{"flat holes", `const a = [1, , [2, , 3], , [, [, 4]]]; return show(a.flat()) + " " + show(a.flat(Infinity)) + " " + show(a.flat(0))`,
			"[1,2,3,[_,4]] [1,2,3,4] [1,[2,_,3],[_,[_,4]]]"},
		{"flat keeps what it does not flatten", `const i = [5], a = [[i], i]; const r = a.flat(), z = a.flat(0);
		  return [r[0] === i, r[1] === 5, z[0] === a[0], z.length].join()`, "true,true,true,2"},
		{"flat leaves array-likes", `const x = { length: 1, 0: "x", [Symbol.isConcatSpreadable]: true }; const r = [x].flat(Infinity);
		  return r.length + ":" + (r[0] === x)`, "1:true"},
		{"flat ignores isConcatSpreadable", `const a = [1, 2]; a[Symbol.isConcatSpreadable] = false; return show([a].flat())`, "[1,2]"},
		{"flat of an array-like", `return show(Array.prototype.flat.call({ length: 4, 0: [1], 2: [2, [3]], 3: "s" }))`, "[1,2,[3],s]"},
		{"flat of a string", `return show(Array.prototype.flat.call("ab"))`, "[a,b]"},
		{"flat through a Proxy", `const log = [];
		  const p = new Proxy([1, , [2]], {
		    has(t, k) { log.push("has " + String(k)); return Reflect.has(t, k); },
		    get(t, k, r) { log.push("get " + String(k)); return Reflect.get(t, k, r); },
		  });
		  const e = show([0, p].flat(Infinity)) + " " + log.join();
		  log.length = 0;
		  return e + " / " + show(Array.prototype.flat.call(p)) + " " + log.join()`,
			"[0,1,2] get length,has 0,get 0,has 1,has 2,get 2 / [1,2] get length,get constructor,has 0,get 0,has 1,has 2,get 2"},
		{"flat order of reads", `const log = [];
		  const o = { get length() { log.push("length"); return 2; }, 0: [1], 1: [[2]] };
		  return show(Array.prototype.flat.call(o, { valueOf() { log.push("depth"); return 2; } })) + " " + log.join()`,
			"[1,2] length,depth"},
		{"flat species", `class A extends Array {}
		  const r = A.from([[1], [2, [3]]]);
		  return [r.flat() instanceof A, r.flat(2) instanceof A, r.flat(0) instanceof A, show(r.flat(2))].join()`, "true,true,true,[1,2,3]"},
		{"flat errors", `const out = [];
		  for (const f of [
		    () => Array.prototype.flat.call(null),
		    () => [].flat(1n),
		    () => [].flat(Symbol()),
		    () => { const p = Proxy.revocable([], {}); p.revoke(); [1, p.proxy].flat(); },
		    () => { const p = Proxy.revocable([], {}); p.revoke(); Array.prototype.flat.call(p.proxy); },
		  ]) {
		    try { f(); out.push("none"); } catch (e) { out.push(e.name + ": " + e.message); }
		  }
		  return out.join(" | ")`,
			"TypeError: cannot convert to object | TypeError: cannot convert bigint to number | TypeError: cannot convert symbol to number | TypeError: revoked proxy | TypeError: revoked proxy"},
		{"flat of itself", `const a = [1]; a.push(a);
		  try { a.flat(Infinity); } catch (e) { return e === null ? "null" : e.name + ": " + e.message; }`,
			"InternalError: stack overflow"},
		{"flat of frozen arrays", `const a = Object.freeze([1, Object.freeze([2, Object.freeze([3, Object.freeze([4])])])]);
		  const o = Object.freeze({ length: 2, 0: Object.freeze([5, Object.freeze([6])]), 1: 7 });
		  return [show(a.flat()), show(a.flat(2)), show(a.flat(Infinity)), show(Array.prototype.flat.call(o, 2)), show([a].flat(2)), show([0].flatMap(() => a))].join(" ")`,
			"[1,2,[3,[4]]] [1,2,3,[4]] [1,2,3,4] [5,6,7] [1,2,[3,[4]]] [1,[2,[3,[4]]]]"},
		{"flat converts its depth once", `let c = 0; const d = { valueOf() { c++; return 1; } };
		  [[1]].flat(d); Array.prototype.flat.call({ length: 1, 0: [1] }, d); return c`, "2"},
		{"flat 0 of an array-like", `const i = [1], r = Array.prototype.flat.call({ length: 3, 0: i, 2: 2 }, 0);
		  return show(r) + " " + (r[0] === i)`, "[[1],2] true"},
		{"flat 0 tests no element", `const p = Proxy.revocable([], {}); p.revoke();
		  return [[p.proxy].flat(0).length, Array.prototype.flat.call({ length: 1, 0: p.proxy }, 0).length].join()`, "1,1"},
		{"flat reads no array-like's length", `let c = 0; const x = { get length() { c++; return 1; } };
		  return [[[x]].flat(Infinity).length, [x].flat().length, c].join()`, "1,1,0"},
		{"flat 1 through a Proxy", `const log = [];
		  const p = new Proxy([1, , [2]], {
		    has(t, k) { log.push("has " + String(k)); return Reflect.has(t, k); },
		    get(t, k, r) { log.push("get " + String(k)); return Reflect.get(t, k, r); },
		  });
		  return show([0, p].flat()) + " " + log.join()`, "[0,1,[2]] get length,has 0,get 0,has 1,has 2,get 2"},
		{"flat ignores setters of Array.prototype", `Object.defineProperty(Array.prototype, "0", { set(v) { throw new Error("set"); }, configurable: true });
		  try { return show([[1, [2]], 3].flat(Infinity)) + " " + show([[1, [2]], 3].flat()); } finally { delete Array.prototype[0]; }`,
			"[1,2,3] [1,[2],3]"},
		{"flat sums", `const r = Array(3).fill(m).flat(); return show(r) + " " + show(m.flat())`, "[a,b,a,b,a,b] [a,b]"},
		{"flat nests", `const r = [[m], [m, [m]]].flat(2); return show(r) + " " + (r[4] === m)`, "[a,b,a,b,<40000>] true"},
		{"flat of a long array", `return show(big.flat()) + " " + show(big.flat(Infinity)) + " " + show(big.flat(0).flat(2))`, "[1,[2]] [1,2] [1,2]"},

		// flatMap
		{"flatMap", `return show([1, 2, 3].flatMap((x) => [x, x * 2]))`, "[1,2,2,4,3,6]"},
		{"flatMap one level", `return show([1, 2].flatMap((x) => [[x]]))`, "[[1],[2]]"},
		{"flatMap holes", `let c = 0; return show([1, , 3].flatMap((x) => (c++, [x]))) + " " + c + " " + show([1].flatMap(() => [, 2, , 3]))`, "[1,3] 2 [2,3]"},
		{"flatMap arguments", `const a = [7];
		  return show(a.flatMap(function (v, i, arr) { return [this.k, v, i, arr === a, arguments.length]; }, { k: "t" }))`, "[t,7,0,true,3]"},
		{"flatMap of an array-like", `const o = { length: 2, 0: 1, 1: 2 };
		  return show(Array.prototype.flatMap.call(o, (v, i, arr) => [v, arr === o]))`, "[1,true,2,true]"},
		{"flatMap leaves array-likes", `const x = { length: 1, 0: "x" }; const r = [1].flatMap(() => x); return r.length + ":" + (r[0] === x)`, "1:true"},
		{"flatMap flattens Proxies", `return show([1].flatMap(() => new Proxy([8, 9], {})))`, "[8,9]"},
		{"flatMap this", `return show([1].flatMap(function () { return [this === globalThis]; })) + show([1].flatMap(function () { return [typeof this]; }, 5)) +
		    show([1].flatMap(function () { "use strict"; return [typeof this]; }, 5))`, "[true][object][number]"},
		{"flatMap species", `class A extends Array {} return A.of(1).flatMap((x) => [x]) instanceof A`, "true"},
		{"flatMap errors", `const out = [];
		  for (const f of [() => [1].flatMap(), () => [1].flatMap(1), () => Array.prototype.flatMap.call(undefined, (x) => x)]) {
		    try { f(); out.push("none"); } catch (e) { out.push(e.name + ": " + e.message); }
		  }
		  return out.join(" | ")`, "TypeError: not a function | TypeError: not a function | TypeError: cannot convert to object"},
		{"flatMap sums", `return show([1, 2, 3].flatMap(() => m)) + " " + show([1].flatMap(() => [m]))`, "[a,b,a,b,a,b] [<40000>]"},
		{"flatMap of a long array", `return show(big.flatMap((x) => x))`, "[1,[2]]"},

		// concat
		{"concat", `return show([1].concat([2, , 3], 4, { length: 2, 0: "a", 1: "b", [Symbol.isConcatSpreadable]: true }, "s", null, undefined))`,
			"[1,2,_,3,4,a,b,s,null,undefined]"},
		{"concat holes", `return show([, 1].concat([, 2])) + " " + show([].concat({ length: 3, 1: "x", [Symbol.isConcatSpreadable]: true }))`, "[_,1,_,2] [_,x,_]"},
		{"concat keeps what it does not spread", `const o = { 0: 5 }, f = () => 1, a = [1, 2];
		  a[Symbol.isConcatSpreadable] = false;
		  const r = [1].concat(o, f, a);
		  return [r.length, r[1] === o, r[2] === f, r[3] === a].join()`, "4,true,true,true"},
		{"concat of what it does not spread", `const o = { a: 1 }, r = Array.prototype.concat.call(o, 2), s = Array.prototype.concat.call("ab", "c");
		  const t = [1]; t[Symbol.isConcatSpreadable] = false;
		  const p = new Proxy(t, {}), u = Array.prototype.concat.call(p, 2), v = t.concat(2);
		  return [r.length, r[0] === o, r[1], s[0] instanceof String, String(s[0]), s.length, u.length, u[0] === p, v[0] === t, Array.isArray(u)].join()`,
			"2,true,2,true,ab,2,2,true,true,true"},
		{"concat spreads Proxies", `return show([].concat(new Proxy([1, 2], {}), new Proxy([3], {})))`, "[1,2,3]"},
		{"concat species", `class B extends Array {}
		  return [B.of(1).concat([2]) instanceof B, Array.prototype.concat.call(new Proxy(B.of(1), {}), [2]) instanceof B, show(B.of(1).concat([2]))].join()`,
			"true,true,[1,2]"},
		{"concat reads isConcatSpreadable once", `let n = 0, k = 0;
		  const o = { get [Symbol.isConcatSpreadable]() { n++; return true; }, length: 1, 0: "z" };
		  const q = { get [Symbol.isConcatSpreadable]() { k++; return false; } };
		  const r = [].concat(o, q), s = Array.prototype.concat.call(q);
		  return [show(r.length), r[0], r[1] === q, s[0] === q, n, k].join()`, "2,z,true,true,1,2"},
		{"concat of long arrays it does not spread", `const b = []; b.length = 70000; b[Symbol.isConcatSpreadable] = false;
		  const r = [1].concat(b, b), s = Array.prototype.concat.call(b, 2);
		  return [r.length, r[1] === b, r[2] === b, s.length, s[0] === b, s[1], Array.isArray(s)].join()`, "3,true,true,2,true,2,true"},
		{"concat ignores setters of Array.prototype", `Object.defineProperty(Array.prototype, "0", { set(v) { throw new Error("set"); }, configurable: true });
		  try { const o = { a: 1 }, r = [].concat(o, [2]); return r.length + ":" + (r[0] === o) + ":" + r[1]; } finally { delete Array.prototype[0]; }`,
			"2:true:2"},
		{"concat reads a flag that would change", `const flips = () => {
		    let n = 0;
		    return { get [Symbol.isConcatSpreadable]() { return n++ > 0; }, get reads() { return n; }, length: 2 ** 53 - 1 };
		  };
		  const o = flips(), q = flips(), r = [].concat(o), s = Array.prototype.concat.call(q);
		  return [r.length, r[0] === o, o.reads, s.length, s[0] === q, q.reads].join()`, "1,true,1,1,true,1"},
		{"concat errors", `try { Array.prototype.concat.call(null); } catch (e) { return e.name + ": " + e.message; }`, "TypeError: cannot convert to object"},
		{"concat sums", `const r = [].concat(m, m, 1); return r.length + ":" + Object.keys(r).join()`, "80001:5,39999,40005,79999,80000"},
		{"concat of a long array", `const r = big.concat([9], big); return r.length + ":" + Object.keys(r).join() + ":" + (r[3] === big[3])`,
			"140001:3,70000,70004:true"},
	}
	hs := tool.Handles{}
	for _, mib := range []int{0, 1} {
		inst := provision(t, &jshost.Options{MemoryLimitMiB: mib}, payload{name: "t.spread", src: spreadTool}, hs)
		for _, tc := range tests {
			t.Run(map[int]string{0: "default/", 1: "1MiB/"}[mib]+tc.name, func(t *testing.T) {
				in, err := json.Marshal(map[string]string{"src": tc.src})
				if err != nil {
					t.Fatal(err)
				}
				// A bound no correct run comes near (the slowest case takes
				// about 3 s under the race detector, measured), for a case
				// that would spin: the old concat looped 2**53 times over
				// an object whose flag changed between its reads.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				out := invoke(ctx, inst, hs, "s", "c", string(in))
				if out.Err != nil {
					t.Fatal(out.Err)
				}
				var got string
				if err := json.Unmarshal(out.Value, &got); err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("got  %s\nwant %s", got, tc.want)
				}
			})
		}
	}
}

// TestWriteLargeFile: fs.writeFile of a string of 6 MiB of UTF-8, or of
// a Uint8Array, fits a realm of the default 64 MiB: the prelude encodes
// UTF-8 into a Uint8Array, not a number[] of about 16 bytes an element
// (which ran out of memory). What it writes is the string's UTF-8 (a lone
// surrogate as U+FFFD). A 15 MiB array, near the fs grant's 16 MiB, is
// written and read back whole: the bytes cross outside the JSON (they
// crossed as base64 inside it, four times the bytes in the realm, and a
// file over about 6 MiB did not fit).
func TestWriteLargeFile(t *testing.T) {
	ws := t.TempDir()
	hs := tool.Handles{FS: fsHandle(t, ws)}
	inst := provision(t, nil, payload{name: "t.write", requires: []handle.Kind{handle.KindFS}, src: register + `
register({ name: "t.write", requires: ["fs"], async run({ handles }, input) {
  switch (input.kind) {
  case "string": await handles.fs.writeFile("big.txt", "é".repeat(3 << 20)); return "ok";
  case "bytes": await handles.fs.writeFile("big.bin", new Uint8Array(4 << 20).fill(7)); return "ok";
  case "near the limit": {
    const a = new Uint8Array(15 << 20);
    for (let i = 0; i < 256; i++) a[i] = i; // the rest of it: doubled by copies, in C
    for (let n = 256; n < a.length; n *= 2) a.copyWithin(n, 0, n);
    await handles.fs.writeFile("near.bin", a.subarray(0, a.length - 1));
    const b = await handles.fs.readFile("near.bin");
    let sum = 0;
    for (let i = 0; i < 4096; i++) sum += b[i] + b[b.length - 1 - i];
    return b.length + " " + sum + " " + (b instanceof Uint8Array);
  }
  case "mixed": await handles.fs.writeFile("mixed.txt", "a\u00e9\u20ac\ud83d\ude00\ud800z" + "xy".repeat(20000)); return "ok";
  }
} });`}, hs)
	for _, c := range []struct {
		kind, file string
		want       func([]byte) bool
	}{
		{"string", "big.txt", func(b []byte) bool { return string(b) == strings.Repeat("é", 3<<20) }},
		{"bytes", "big.bin", func(b []byte) bool { return len(b) == 4<<20 && b[0] == 7 && b[len(b)-1] == 7 }},
		{"mixed", "mixed.txt", func(b []byte) bool { return string(b) == "aé€😀\uFFFDz"+strings.Repeat("xy", 20000) }},
		{"near the limit", "near.bin", func(b []byte) bool {
			for i := range b {
				if b[i] != byte(i) {
					return false
				}
			}
			return len(b) == 15<<20-1
		}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			if c.kind == "string" && testutil.RaceEnabled {
				// The engine runs about ten times slower under the race
				// detector: minutes for these, which check memory, not races.
				t.Skip("megabytes a byte at a time in the engine: too slow under -race")
			}
			out := invoke(context.Background(), inst, hs, "s-"+c.kind, "c", `{"kind":"`+c.kind+`"}`)
			if out.Err != nil {
				t.Fatalf("%+v", out.Err)
			}
			// Read back in the realm: its length, and the sum of its first
			// and last 4,096 bytes (a cycle of 0…255 from the start).
			if want := fmt.Sprintf(`"%d %d true"`, 15<<20-1, 2*16*(255*256/2)); c.kind == "near the limit" && string(out.Value) != want {
				t.Fatalf("read back %s, want %s", out.Value, want)
			}
			b, err := os.ReadFile(filepath.Join(ws, c.file))
			if err != nil || !c.want(b) {
				t.Fatalf("%s: %d bytes %q…, %v", c.file, len(b), b[:min(len(b), 16)], err)
			}
		})
	}
}

// TestExecBytes: exec's stdin goes to the program as the bytes given, and
// its stdout and stderr come back each as its own (they cross outside the
// JSON, handed back in that order); a look-alike of a Uint8Array (a
// Proxy of one) is refused with a TypeError the tool may catch, and the
// byte functions the prelude holds are not globals a payload can reach.
func TestExecBytes(t *testing.T) {
	ws := t.TempDir()
	e, err := proc.New(proc.Grants{Root: ws, Allow: []string{"sh"}, MaxOutputBytes: 1 << 20, Timeout: 30 * time.Second, Network: os.Geteuid() != 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	hs := tool.Handles{Exec: e}
	inst := provision(t, nil, payload{name: "t.cat", requires: []handle.Kind{handle.KindExec}, src: register + `
register({ name: "t.cat", requires: ["exec"], async run({ handles }, input) {
  if (input.kind === "proxy") {
    try { await handles.exec.run({ program: "sh", args: ["-c", "cat"], stdin: new Proxy(new Uint8Array(2), {}) }); return "ran"; }
    catch (e) { return e.name; }
  }
  if (input.kind === "globals") return [typeof globalThis.__brain_bytesOut, typeof globalThis.__brain_bytesIn, typeof globalThis.__brain_host].join(" ");
  const stdin = new Uint8Array(300_000);
  for (let i = 0; i < stdin.length; i++) stdin[i] = (i * 7) & 255;
  const r = await handles.exec.run({ program: "sh", args: ["-c", "cat; printf err >&2"], stdin });
  let same = r.stdout.length === stdin.length;
  for (let i = 0; same && i < stdin.length; i++) same = r.stdout[i] === stdin[i];
  return { exitCode: r.exitCode, same, stderr: String.fromCharCode(...r.stderr) };
} });`}, hs)
	for input, want := range map[string]string{
		`{"kind":"cat"}`:     `{"exitCode":0,"same":true,"stderr":"err"}`,
		`{"kind":"proxy"}`:   `"TypeError"`,
		`{"kind":"globals"}`: `"undefined undefined undefined"`,
	} {
		if out := invoke(context.Background(), inst, hs, "s", "c", input); out.Err != nil || string(out.Value) != want {
			t.Errorf("%s: %s %+v, want %s", input, out.Value, out.Err, want)
		}
	}
}
