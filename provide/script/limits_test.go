package script_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/script"
)

// longBuiltin is a script that spends its time inside a built-in
// written in C that does not poll the engine's interrupt: indexOf over
// the holes of a sparse array whose prototype chain is deep, which looks
// every hole up along the whole chain (a gap the guards in realm.js do
// not close: docs/handle-js.md). About 3 s here. Under the race detector
// the calls between the stuck ones take seconds to make their realms, so
// the walk is longer there.
func longBuiltin() string {
	n := 200000
	if testutil.RaceEnabled {
		n = 100000
	}
	return longBuiltinOf(n)
}

// longBuiltinOf is longBuiltin walking n holes.
func longBuiltinOf(n int) string {
	const depth = 300
	return `() => { const a = new Array(` + strconv.Itoa(n) + `); let p = Array.prototype;
		for (let i = 0; i < ` + strconv.Itoa(depth) + `; i++) p = Object.create(p);
		Object.setPrototypeOf(a, p); a.indexOf(1) }`
}

func TestTimeout(t *testing.T) {
	const limit = 200 * time.Millisecond
	// One slot, so that waitIdle can tell when the script that outlived
	// its call has ended. The calls end at their context's limit; the
	// grant is long, so that the calls that make a realm in place of a
	// closed one (warm) have the time a loaded machine needs.
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, &script.Options{MaxConcurrent: 1})
	tests := []struct {
		name  string
		src   string
		slack time.Duration // beyond the limit
	}{
		{name: "infinite loop", src: `() => { while (true) {} }`, slack: 300 * time.Millisecond},
		{name: "infinite recursion through callbacks", src: `() => { for (;;) [1, 2, 3].map(x => x).sort((a, b) => a - b) }`, slack: 300 * time.Millisecond},
		{name: "loop in a getter of the result", src: `() => ({get x() { for (;;) {} }})`, slack: 300 * time.Millisecond},
		{name: "loop in a thrown value's toString", src: `() => { throw {toString() { for (;;) {} }} }`, slack: 300 * time.Millisecond},
		{name: "async loop", src: `async () => { for (;;) await null }`, slack: 300 * time.Millisecond},
		{name: "catastrophic regular expression", src: `() => /^(a+)+(?=b)/.test("a".repeat(40))`, slack: 300 * time.Millisecond},
		{name: "deep recursion until the deadline", src: `() => { const f = (n) => { try { return f(n + 1) } catch (e) { return f(n + 1) } }; for (;;) f(0) }`, slack: 300 * time.Millisecond},
		// Call returns 5 ms after the deadline; the built-in finishes in
		// the background.
		{name: "inside a long built-in", src: longBuiltin(), slack: 300 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			warm(t, r)
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			start := time.Now()
			out, err := r.Call(ctx, tc.src, nil)
			elapsed := time.Since(start)
			check(t, out, err, "", protocol.CodeTimeout, "")
			if want := limit + slow(tc.slack); elapsed > want {
				t.Errorf("Call took %v, want at most %v", elapsed, want)
			}
		})
	}
	waitIdle(t, r)
}

// waitIdle waits until the script that outlived its call on r, a Runtime
// with one slot, has ended, so that it does not slow the tests that
// follow: a trivial call succeeds once it gets the slot.
func waitIdle(t *testing.T, r *script.Runtime) {
	t.Helper()
	// Five scripts that linger for seconds each share two cores; the race
	// detector makes each several times longer.
	ctx, cancel := context.WithTimeout(context.Background(), slow(time.Minute))
	defer cancel()
	var last error
	for ctx.Err() == nil {
		_, err := r.Call(ctx, `() => 1`, nil)
		if err == nil {
			return
		}
		last = err
	}
	t.Fatalf("a script still runs %v after its call ended (last error: %v)", slow(time.Minute), last)
}

func TestContext(t *testing.T) {
	r := newRuntime(t, script.Grants{}, nil)
	t.Run("cancelled while running", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Whether the cancel lands before or during the call, the call
		// must end with cancelled, and promptly.
		stop := time.AfterFunc(50*time.Millisecond, cancel)
		defer stop.Stop()
		start := time.Now()
		out, err := r.Call(ctx, `() => { while (true) {} }`, nil)
		check(t, out, err, "", protocol.CodeCancelled, "cancelled")
		if d := time.Since(start); d > slow(time.Second) {
			t.Errorf("Call took %v after a cancel at 50ms", d)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out, err := r.Call(ctx, `() => 1`, nil)
		check(t, out, err, "", protocol.CodeCancelled, "")
	})
	t.Run("caller's deadline first", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		out, err := r.Call(ctx, `() => { while (true) {} }`, nil)
		check(t, out, err, "", protocol.CodeTimeout, "")
		if d := time.Since(start); d > slow(time.Second) {
			t.Errorf("Call took %v under a 100ms deadline (the grant is 5s)", d)
		}
	})
}

// catastrophic is the regular expression of issue 9: exponential
// backtracking, which the engine's interrupt stops at the deadline.
const catastrophic = `() => /^(a+)+(?=b)/.test("a".repeat(40))`

// TestSlotsBusy: a script given up inside a built-in that does not poll
// gives its slot back as its call ends and lingers; past four lingering
// scripts a slot, the fifth keeps its slot, and the next call finds none
// free. The slots come back as the built-ins end.
func TestSlotsBusy(t *testing.T) {
	testutil.SkipUnderRace(t)
	// A long grant: the calls between the stuck ones make realms, which
	// must not be what times out on a loaded machine.
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, &script.Options{MaxConcurrent: 1})
	// The deadline must come inside the built-in, after the script's own
	// set-up (a few milliseconds).
	const inside = 100 * time.Millisecond
	// The built-ins must outlast all five stuck calls and the last one:
	// a script that ended early frees a lingering token, the fifth stuck
	// one then gives its slot back, and the last call runs instead of
	// waiting (a loaded fresh-clone run: it got the slot and timed out
	// making its realm). A million holes take about five times the
	// others' (TestTimeout's) 200,000, which end within the calls.
	stuck := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), inside)
		defer cancel()
		out, err := r.Call(ctx, longBuiltinOf(1000000), nil)
		check(t, out, err, "", protocol.CodeTimeout, "")
	}
	if _, err := r.Call(context.Background(), `() => 0`, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		stuck()
		if i < 4 {
			out, err := r.Call(context.Background(), `() => 1`, nil)
			check(t, out, err, "1", "", "")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	out, err := r.Call(ctx, `() => 1`, nil)
	check(t, out, err, "", protocol.CodeTimeout, "no script slot came free before the deadline: all 1 are busy")
	waitIdle(t, r)
}

// TestCatastrophicRegexp is issue 9, finding 5: two concurrent
// catastrophic regular expressions time out their own calls, and the next
// call succeeds at once, however often it is repeated.
func TestCatastrophicRegexp(t *testing.T) {
	// The catastrophic calls end at their context's limit; the normal
	// ones have the grant's 2s, so that preparing a fresh runtime (in
	// place of an abandoned one) on a loaded machine is not what times
	// out: the test is about the slot.
	const limit = 300 * time.Millisecond
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, &script.Options{MaxConcurrent: 2})
	// warm readies two runtimes, as a handle that has served calls has.
	warm := func() {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, err := r.Call(context.Background(), `() => 0`, nil); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for round := range 3 {
		warm()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := time.Now()
		for i := range errs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				defer cancel()
				_, errs[i] = r.Call(ctx, catastrophic, nil)
			})
		}
		wg.Wait()
		for _, err := range errs {
			check(t, nil, err, "", protocol.CodeTimeout, "")
		}
		if d := time.Since(start); d > limit+slow(1500*time.Millisecond) {
			t.Errorf("round %d: the calls took %v under a %v timeout", round, d, limit)
		}
		start = time.Now()
		out, err := r.Call(context.Background(), `(a) => a.x + 1`, json.RawMessage(`{"x": 41}`))
		check(t, out, err, "42", "", "")
		// At once: nothing waits for a slot (it used to fail after 30s).
		// The bound allows for the lingering scripts that share the CPUs
		// and for preparing a fresh runtime in place of an abandoned one.
		if d := time.Since(start); d > nextCallBound() {
			t.Errorf("round %d: the next call took %v", round, d)
		}
	}
}

// nextCallBound is how long the call after two catastrophic ones may
// take: it makes a realm in place of a closed one (15 ms idle), on a
// machine where the lingering scripts share the CPUs. Under the race
// detector a realm takes seconds on a loaded machine (7 s seen at load
// average 8); the bound stays under the 30 s the call took when a slot
// was held for the whole match (issue 9).
func nextCallBound() time.Duration {
	if testutil.RaceEnabled {
		return 20 * time.Second
	}
	return 1500 * time.Millisecond
}

// TestLongTimeoutRegexp: under a timeout longer than regexp2's match
// timeout was (5 s), a catastrophic match runs to the call's deadline
// and ends timeout; ordinary patterns work.
func TestLongTimeoutRegexp(t *testing.T) {
	const limit = 6 * time.Second
	r := newRuntime(t, script.Grants{Timeout: limit}, nil)
	start := time.Now()
	out, err := r.Call(context.Background(), `() => /^(a+)+(?=b)/.test("a".repeat(40)) ? "match" : "no match"`, nil)
	check(t, out, err, "", protocol.CodeTimeout, "")
	if d := time.Since(start); d < limit || d > limit+slow(300*time.Millisecond) {
		t.Errorf("Call took %v under a %v timeout", d, limit)
	}
	out, err = r.Call(context.Background(), `() => ["a1b22".replace(/\d+/g, "#"), /(?<=a)b/.test("ab"), "x,y".split(/,/), "aXbX".match(/X/g).length]`, nil)
	check(t, out, err, `["a#b#",true,["x","y"],2]`, "", "")
}

// TestHugeAllocations runs scripts that would take gigabytes, each of
// which must end with too_large (or timeout) while the process stays
// within a small multiple of the budget.
func TestHugeAllocations(t *testing.T) {
	testutil.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("allocates up to a few hundred MiB")
	}
	// No case is about time: the engine refuses each allocation as it
	// would pass the budget.
	timeout := raceGrant(30 * time.Second)
	r := newRuntime(t, script.Grants{MaxMemoryBytes: 16 << 20, Timeout: timeout}, nil)
	const tooLarge = protocol.CodeTooLarge
	// The engine's allocator refuses what would pass the budget; a size
	// beyond the engine's own bounds is a RangeError before any
	// allocation; a length only holes can fill is refused by the guards
	// of the built-ins that would walk it in C (realm.js).
	const budget, bound = "memory budget of 16 MiB", "a size beyond the engine's limits"
	tests := []jsCase{
		{name: "repeat", src: `() => "x".repeat(1e9).length`, code: tooLarge, msg: budget},
		{name: "repeat past the engine's bound", src: `() => "x".repeat(1e10).length`, code: tooLarge, msg: bound},
		{name: "padStart", src: `() => "".padStart(2 ** 31, "ab")`, code: tooLarge, msg: bound},
		{name: "concat", src: `() => "".concat(...Array(1000).fill("x".repeat(1e6)))`, code: tooLarge, msg: "String.prototype.concat would build a string of 1000000000 characters"},
		{name: "Array fill", src: `() => new Array(1e9).fill(0).length`, code: tooLarge, msg: "Array.prototype.fill on a length of 1000000000"},
		{name: "array-like fill", src: `() => Array.prototype.fill.call({length: 2 ** 53 - 1}, 0)`, code: tooLarge, msg: "Array.prototype.fill"},
		{name: "length set by hand", src: `() => { const a = []; a.length = 2 ** 32 - 1; return a.toReversed() }`, code: tooLarge, msg: bound},
		{name: "CPU-only loop over a huge length", src: `() => Array(2 ** 32 - 1).indexOf(1)`, code: tooLarge, msg: "Array.prototype.indexOf"},
		{name: "CPU-only loop over a huge array-like", src: `() => Array.prototype.join.call({length: 2 ** 53 - 1}, "")`, code: tooLarge, msg: "Array.prototype.join"},
		{name: "a proxy that lies about its length", src: `() => { let n = 0; return Array.prototype.includes.call(new Proxy([], {get(t, k) { return k === "length" ? (n++ ? 2 ** 53 - 1 : 1) : undefined }}), 1) }`, want: `false`},
		{name: "drop over an iterator whose array grew", src: `() => { const a = []; const it = a.values(); a.length = 2 ** 32 - 1; return it.drop(2 ** 32).next() }`, code: tooLarge, msg: "Iterator.prototype.drop"},
		{name: "Array.from length", src: `() => Array.from({length: 1e9})`, code: tooLarge, msg: budget},
		{name: "apply", src: `() => Math.max.apply(null, {length: 1e9})`, code: tooLarge, msg: bound},
		{name: "Reflect.apply", src: `() => Reflect.apply(Math.max, null, Array(1e9))`, code: tooLarge, msg: bound},
		{name: "concat of sparse arrays", src: `() => [].concat(Array(1e9))`, code: tooLarge, msg: "Array.prototype.concat"},
		{name: "concat of a huge array-like", src: `() => [].concat({length: 2 ** 53 - 1, [Symbol.isConcatSpreadable]: true})`, code: tooLarge, msg: "Array.prototype.concat"},
		{name: "typed array", src: `() => new Float64Array(1e9)`, code: tooLarge, msg: bound},
		{name: "typed array from array-like", src: `() => new Uint8Array({length: 1e9})`, code: tooLarge, msg: budget},
		{name: "typed array through its prototype's constructor", src: `() => new Uint8Array.prototype.constructor(1e9)`, code: tooLarge, msg: budget},
		{name: "ArrayBuffer", src: `() => new ArrayBuffer(1e9)`, code: tooLarge, msg: budget},
		{name: "TypedArray.from", src: `() => Int32Array.from({length: 1e9})`, code: tooLarge, msg: bound},
		{name: "join of a long separator", src: `() => Array(1e6).join("x".repeat(1000))`, code: tooLarge, msg: budget},
		{name: "typed array join", src: `() => new Uint8Array(1e5).join("x".repeat(1e4))`, code: tooLarge, msg: budget},
		{name: "join of one long string many times", src: `() => Array(1000).fill("x".repeat(1e6)).join("")`, code: tooLarge, msg: budget},
		{name: "String.raw", src: `() => String.raw({raw: Array(1000).fill("x".repeat(1e6))})`, code: tooLarge, msg: budget},
		{name: "replace with a long replacement", src: `() => "x".repeat(1e5).replaceAll("x", "y".repeat(1000))`, code: tooLarge, msg: budget},
		{name: "replace with quadratic $'", src: `() => "x".repeat(1e5).replace(/x/g, "$'")`, code: tooLarge, msg: budget},
		{name: "replace with a function", src: `() => "x".repeat(1e5).replace(/x/g, () => "y".repeat(1000))`, code: tooLarge, msg: budget},
		// A pattern is memory like any other: a long one compiles within
		// the budget, a huge one does not.
		{name: "long pattern", src: `() => new RegExp("(".repeat(1e6) + ")".repeat(1e6))`, code: protocol.CodeInvalidArgument, msg: "too many captures"},
		{name: "long pattern through the prototype's constructor", src: `() => new (/x/.constructor)("a".repeat(1e6)).source.length`, want: `1000000`, or: raceOr()},
		{name: "huge pattern", src: `() => new RegExp("a".repeat(2e7))`, code: tooLarge, msg: budget},
		{name: "regular expression over a long subject", src: `() => "x".repeat(1e6).split(/x/)`, code: tooLarge, msg: budget},
		{name: "split into characters", src: `() => "x".repeat(1e6).split("")`, code: tooLarge, msg: budget},
		{name: "JSON.parse of a long text", src: `() => JSON.parse("[" + "[],".repeat(1e6) + "[]]")`, code: tooLarge, msg: budget},
		{name: "Object.keys of a string", src: `() => Object.keys("x".repeat(1e6))`, code: tooLarge, msg: budget},
		// 2**40 leaves at about 2 µs a node reach the budget in some 10 s,
		// more on a loaded machine: the deadline may come first.
		{name: "JSON.stringify of a shared tree", src: `() => { let a = [1]; for (let i = 0; i < 40; i++) a = [a, a]; return JSON.stringify(a) }`, code: tooLarge, msg: budget, or: protocol.CodeTimeout},
		// Gradual growth.
		{name: "push forever", src: `() => { const a = []; for (;;) a.push(1) }`, code: tooLarge, msg: budget},
		{name: "grow by index forever", src: `() => { const a = []; for (let i = 0; ; i++) a[i] = i }`, code: tooLarge, msg: budget},
		{name: "string doubling", src: `() => { let s = "x"; for (;;) s = s + s + "y" }`, code: tooLarge, msg: budget},
		{name: "objects forever", src: `() => { const m = new Map(); for (let i = 0; ; i++) m.set(i, {i}) }`, code: tooLarge, msg: budget},
		{name: "spread of a huge sparse array", src: `() => [...Array(1e9)].length`, code: tooLarge, msg: "Array.prototype.values on a length of 1000000000"},
		{name: "spread of an iterator whose array grew", src: `() => { const a = []; const it = a.values(); a.length = 1e9; return [...it].length }`, code: tooLarge, msg: budget},
		{name: "prototype chain", src: `() => { let p = {}; for (;;) p = Object.create(p) }`, code: tooLarge, msg: budget},
		{name: "flat of a shared tree", src: `() => { let a = [1]; for (let i = 0; i < 40; i++) a = [a, a]; return a.flat(Infinity).length }`, code: tooLarge, msg: "Array.prototype.flat on a length of"},
		{name: "caught and retried", src: `() => { for (;;) { try { const a = []; for (;;) a.push([1]) } catch (e) {} } }`, code: tooLarge, msg: budget},
	}
	raceTimeout(tests)
	var peak uint64
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, r)
			m := processMemory()
			peak = max(peak, m)
			if m > 1<<30 {
				t.Errorf("the process holds %d MiB after the call", m>>20)
			}
		})
	}
	t.Logf("the process held at most %d MiB", peak>>20)
}

// TestDeepStructures checks that structures built within the budget and
// walked by Go code end with an error rather than a fatal stack overflow.
func TestDeepStructures(t *testing.T) {
	testutil.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("builds structures of up to 100 MiB")
	}
	// The longest grant: none of these cases is about time, and the chain
	// walks grow a goroutine stack of up to 200 MiB, page by page; under
	// -race on two cores beside other tests they took 7 to more than 20 s
	// (3 s idle).
	r := newRuntime(t, script.Grants{Timeout: raceGrant(30 * time.Second)}, nil)
	bad := protocol.CodeInvalidArgument
	tests := []jsCase{
		{name: "flat of a cycle", src: `() => { const a = []; a[0] = a; return a.flat(Infinity) }`, code: bad, msg: "maximum call stack size"},
		{name: "join of a deep array", src: `() => { let a = []; for (let i = 0; i < 1e5; i++) a = [a]; return String(a).length }`, code: bad, msg: "maximum call stack size"},
		{name: "stringify of a deep object", src: `() => { let o = {}; for (let i = 0; i < 1e5; i++) o = {o}; return JSON.stringify(o).length }`, code: bad, msg: "maximum call stack size"},
		{name: "reviver grafting depth", src: `() => JSON.parse('{"a":1,"b":{}}', function (k, v) { let o = {}; for (let i = 0; i < 6000; i++) o = {o}; if (k === "a") this.b = o; return 0 })`, code: bad, msg: "maximum call stack size"},
		{name: "JSON.parse of deep text", src: `() => JSON.parse("[".repeat(4e5) + "]".repeat(4e5))`, code: bad, msg: "SyntaxError: stack overflow"},
		{name: "JSON.parse of brackets in strings", src: `() => JSON.parse(JSON.stringify("[".repeat(1e4))).length`, want: `10000`},
		// What the chains check is that their walk does not crash the
		// process; a machine too loaded to finish it in 30 s may time out.
		{name: "assignment through a long prototype chain", src: `() => { let p = {}; for (let i = 0; i < 3e5; i++) p = Object.create(p); p.x = 1; return p.x }`, want: `1`, or: protocol.CodeTimeout},
		// QuickJS recurses through a proxy chain: past its stack limit, a
		// catchable error.
		{name: "assignment through a long proxy chain", src: `() => { let p = {}; for (let i = 0; i < 1e5; i++) p = new Proxy(p, {}); p.x = 1; return p.x }`, code: bad, msg: "maximum call stack size"},
		{name: "deep JSON arguments", args: strings.Repeat("[", 20000) + strings.Repeat("]", 20000), src: `(a) => a`, code: bad, msg: "the arguments nest deeper than 5000 levels"},
	}
	raceTimeout(tests)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, r) })
	}
}

// TestConcurrentCalls runs calls from many goroutines at once, some of
// which time out, under a small concurrency bound.
func TestConcurrentCalls(t *testing.T) {
	// A long grant: the calls after each stopped one make a realm in place
	// of the closed one, 15 ms idle, seconds under the race detector on a
	// loaded machine.
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, &script.Options{MaxConcurrent: 3})
	const workers, calls = 8, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				if w == 0 && i%5 == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					out, err := r.Call(ctx, `() => { for (;;) {} }`, nil)
					cancel()
					if err == nil {
						t.Errorf("infinite loop returned %s", out)
					}
					continue
				}
				args := []byte(`{"w": ` + strconv.Itoa(w) + `, "i": ` + strconv.Itoa(i) + `}`)
				out, err := r.Call(context.Background(), `(a) => { globalThis.seen = (globalThis.seen || 0) + 1; return [a.w, a.i, seen, [3, 1, 2].sort().join("")] }`, args)
				if want := `[` + strconv.Itoa(w) + `,` + strconv.Itoa(i) + `,1,"123"]`; err != nil || string(out) != want {
					t.Errorf("worker %d call %d: %s, %v; want %s", w, i, out, err, want)
				}
			}
		}()
	}
	wg.Wait()
}

// TestAmplificationStopsAtOnce is issue 24's finding 9: string and array
// amplification (doubling, join, repeat, concat) and a memory bomb end
// too_large at the engine's memory limit, before the deadline, and the
// handle serves the next call. On goja the ASCII doubling ended timeout
// after 8 s under a 5 s deadline, the non-ASCII one after 11.5 s, the
// concat doubling too_large after 2.6 s.
func TestAmplificationStopsAtOnce(t *testing.T) {
	testutil.SkipUnderRace(t)
	r := newRuntime(t, script.Grants{}, &script.Options{MaxConcurrent: 1})
	serves := func(t *testing.T) {
		t.Helper()
		out, err := r.Call(context.Background(), `(a) => a.x + 1`, json.RawMessage(`{"x": 41}`))
		check(t, out, err, "42", "", "")
	}
	// What allocates in large steps ends in milliseconds: under half the
	// default 5 s deadline, which leaves a loaded machine a few hundred
	// times what a quiet one takes.
	bound := script.DefaultTimeout / 2
	for _, tc := range []struct{ name, src string }{
		{"string doubling", `() => { let s = "x"; while (true) s += s }`},
		{"non-ASCII string doubling", `() => { let s = "é😀"; while (true) s = s + s }`},
		{"repeat", `() => "x".repeat(1e9)`},
		{"repeat of a long string", `() => "x".repeat(1e4).repeat(1e5)`},
		{"concat of strings", `() => "".concat(...Array(60000).fill("x".repeat(1e4)))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := r.Call(context.Background(), tc.src, nil)
			took := time.Since(start)
			check(t, out, err, "", protocol.CodeTooLarge, "")
			if took > bound {
				t.Errorf("ended after %v, want under %v", took, bound)
			}
			t.Logf("too_large after %v: %v", took, err)
			serves(t)
		})
	}
	// What fills the budget element by element takes as long as the
	// engine needs to build 128 MiB that way: about a second on a quiet
	// machine (the transpiled engine copies an array element at about
	// 0.3 µs), several under load. Under a long deadline it must end at
	// the budget, not at the deadline.
	long := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, &script.Options{MaxConcurrent: 1})
	for _, tc := range []struct{ name, src string }{
		{"array doubling", `() => { let a = [1]; while (true) a = a.concat(a) }`},
		{"join", `() => Array(1e6).fill("x".repeat(1000)).join("")`},
		{"memory bomb", `() => { const a = []; for (;;) a.push({n: a.length, s: "y" + a.length}) }`},
		{"typed arrays", `() => { const a = []; for (;;) a.push(new Float64Array(1e6)) }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := long.Call(context.Background(), tc.src, nil)
			check(t, out, err, "", protocol.CodeTooLarge, "")
			t.Logf("too_large after %v: %v", time.Since(start), err)
			serves(t)
		})
	}
	// A doubling string is a rope: it passes the engine's longest string
	// (2**30 characters) with little memory, and "string too long" is an
	// error a script can catch. Caught and retried for ever, it ends at
	// the deadline, interrupted.
	t.Run("string doubling caught and retried", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		out, err := r.Call(ctx, `() => { for (;;) { try { let s = "x"; while (true) s += s } catch (e) {} } }`, nil)
		check(t, out, err, "", protocol.CodeTimeout, "")
		if took := time.Since(start); took > 200*time.Millisecond+slow(300*time.Millisecond) {
			t.Errorf("ended after %v under a 200ms deadline", took)
		}
		serves(t)
	})
}
