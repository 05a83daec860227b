package jsvm_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/internal/jsvm"
	"github.com/brainrt/brain/internal/testutil"
)

func newVM(t testing.TB, lim jsvm.Limits) *jsvm.VM {
	t.Helper()
	vm, err := jsvm.New(lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Close)
	return vm
}

// eval runs src as a global script on vm under ctx and returns its value.
func eval(ctx context.Context, vm *jsvm.VM, src string) (any, error) {
	var out any
	err := vm.Run(ctx, func(q *quickjs.VM) error {
		var err error
		out, err = q.Eval(src, quickjs.EvalGlobal)
		return err
	})
	if err != nil { // a script given up may still write out
		return nil, err
	}
	return out, nil
}

// overshoot is how far past its deadline a call may return: issue 22's
// bar of 10 ms. Run gives a script that has not stopped [jsvm.Grace]
// (5 ms) after its deadline up; the rest is for the machine, whose own
// lateness in waking a goroutine at a deadline the test measures (a
// baseline wait) and adds. Under the race detector the transpiled engine
// runs about ten times slower, and so do the steps between two polls of
// its interrupt: the bar is ten times wider there.
var overshoot = 10 * time.Millisecond

func init() {
	if testutil.RaceEnabled {
		overshoot = 100 * time.Millisecond
	}
}

// wakeLateness measures how late this machine wakes a goroutine waiting
// for a context's deadline of d while another goroutine keeps a CPU busy,
// as a running script does.
func wakeLateness(d time.Duration) time.Duration {
	var stop atomic.Bool
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		x := 0
		for !stop.Load() {
			x++
		}
		_ = x
	}()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	<-ctx.Done()
	late := time.Since(start) - d
	stop.Store(true)
	<-spun
	return late
}

// TestDeadlines: each script runs until stopped, and is stopped within
// overshoot of its deadline (or at once, at the memory limit), and the VM
// then serves the next script.
func TestDeadlines(t *testing.T) {
	const limit = 100 * time.Millisecond
	tests := []struct {
		name string
		src  string
		want jsvm.Kind
		// or is another kind accepted: work that grows step by step may
		// reach its deadline before its limit on a slow machine.
		or jsvm.Kind
	}{
		{name: "infinite loop", src: `for (;;) {}`, want: jsvm.Timeout},
		{name: "concat of a huge array, a built-in that never polls", src: `{ let a = Array(1e6).fill(1); for (;;) a.concat(a, a, a) }`, want: jsvm.Timeout},
		{name: "infinite loop catching everything", src: `for (;;) { try { for (;;) {} } catch (e) {} finally { } }`, want: jsvm.Timeout},
		{name: "catastrophic regexp", src: `/^(a+)+(?=b)/.test("a".repeat(40))`, want: jsvm.Timeout},
		{name: "catastrophic regexp in a loop", src: `for (;;) /(x+x+)+y/.test("x".repeat(30))`, want: jsvm.Timeout},
		{name: "string doubling", src: `{ let s = "x"; for (;;) s += s }`, want: jsvm.Memory},
		{name: "non-ASCII string doubling", src: `{ let s = "é😀"; for (;;) s = s + s }`, want: jsvm.Memory},
		{name: "string doubling flattened", src: `{ let s = "x"; for (;;) { s += s; s.charCodeAt(s.length >> 1) } }`, want: jsvm.Memory, or: jsvm.Timeout},
		{name: "array doubling", src: `{ let a = [1]; for (;;) a = a.concat(a) }`, want: jsvm.Memory, or: jsvm.Timeout},
		{name: "push forever", src: `{ const a = []; for (;;) a.push({x: a.length}) }`, want: jsvm.Memory, or: jsvm.Timeout},
		{name: "join amplification", src: `Array(1e6).fill("x".repeat(1000)).join("")`, want: jsvm.Memory, or: jsvm.Timeout},
		{name: "repeat", src: `"x".repeat(2 ** 29).length`, want: jsvm.Memory},
		{name: "typed array", src: `new Float64Array(1e8)`, want: jsvm.Memory},
		{name: "deep recursion", src: `{ const f = (n) => f(n + 1) + 1; f(0) }`, want: jsvm.Stack, or: jsvm.Timeout},
		{name: "async loop", src: `(async () => { for (;;) await null })(); for (;;) {}`, want: jsvm.Timeout},
	}
	parent := t
	vm := newVM(t, jsvm.Limits{MemoryBytes: 32 << 20})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if vm.Gone() { // given up by the case before: a fresh one, as a host makes
				vm = newVM(parent, jsvm.Limits{MemoryBytes: 32 << 20})
			}
			// The engine's precision is the best of three tries: a machine
			// shared with other jobs only ever adds to it.
			var took, late time.Duration
			var err error
			for try := range 3 {
				if try > 0 && vm.Gone() {
					vm = newVM(parent, jsvm.Limits{MemoryBytes: 32 << 20})
				}
				late = max(late, wakeLateness(limit))
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				start := time.Now()
				_, err = eval(ctx, vm, tc.src)
				took = time.Since(start)
				cancel()
				if got := jsvm.KindOf(err); err == nil || (got != tc.want && (tc.or == jsvm.Thrown || got != tc.or)) {
					t.Fatalf("error %v (kind %d), want kind %d", err, got, tc.want)
				}
				if took <= limit+overshoot+late {
					break
				}
				if try == 2 {
					t.Errorf("stopped after %v, want at most %v + %v (+ %v, this machine's lateness)", took, limit, overshoot, late)
				}
			}
			t.Logf("%v after %v (gone %v)", err, took, vm.Gone())
			if vm.Gone() {
				return
			}
			if out, err := eval(context.Background(), vm, `1 + 1`); err != nil || out != 2 {
				t.Fatalf("the next script: %v, %v", out, err)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	vm := newVM(t, jsvm.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	// Whether the cancel lands before or while the loop runs, the script
	// must end cancelled.
	stop := time.AfterFunc(20*time.Millisecond, cancel)
	defer stop.Stop()
	_, err := eval(ctx, vm, `for (;;) {}`)
	if jsvm.KindOf(err) != jsvm.Cancelled {
		t.Fatalf("error %v, want cancelled", err)
	}
	if vm.Gone() { // the engine did not notice within jsvm.Grace (a slow machine)
		vm = newVM(t, jsvm.Limits{})
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := eval(ctx, vm, `1`); jsvm.KindOf(err) != jsvm.Cancelled {
		t.Fatalf("already cancelled: %v", err)
	}
}

func TestThrown(t *testing.T) {
	vm := newVM(t, jsvm.Limits{})
	_, err := eval(context.Background(), vm, "\n throw new TypeError('boom')")
	var je *jsvm.Error
	if !errors.As(err, &je) || je.Kind != jsvm.Thrown || je.Name != "TypeError" || je.Message != "boom" {
		t.Fatalf("error %#v", err)
	}
	// A script that catches its own out-of-memory error goes on: the limit
	// held, and the VM serves on.
	out, err := eval(context.Background(), vm, `let s = "x"; try { for (;;) s += s + s } catch (e) { String(e) }`)
	if err != nil || !strings.Contains(out.(string), "InternalError") {
		t.Fatalf("caught OOM: %v, %v", out, err)
	}
}

// TestGlobals: the global object holds the ECMAScript built-ins QuickJS
// implements, and nothing of the host.
func TestGlobals(t *testing.T) {
	vm := newVM(t, jsvm.Limits{})
	out, err := eval(context.Background(), vm, `Object.getOwnPropertyNames(globalThis).sort().join(" ")`)
	if err != nil {
		t.Fatal(err)
	}
	const want = "AggregateError Array ArrayBuffer Atomics BigInt BigInt64Array BigUint64Array Boolean DataView Date Error EvalError FinalizationRegistry Float16Array Float32Array Float64Array Function Infinity Int16Array Int32Array Int8Array InternalError Iterator JSON Map Math NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set SharedArrayBuffer String Symbol SyntaxError TypeError URIError Uint16Array Uint32Array Uint8Array Uint8ClampedArray WeakMap WeakRef WeakSet decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval globalThis isFinite isNaN parseFloat parseInt undefined unescape"
	if out != want {
		t.Errorf("globals:\n%v\nwant\n%v", out, want)
	}
	// No module loader: an import of anything fails.
	out, err = eval(context.Background(), vm, `let r; import("os").then(() => r = "loaded", e => r = String(e)); r`)
	if err != nil || out == "loaded" {
		t.Fatalf("import: %v, %v", out, err)
	}
}

// rss returns the process's resident memory in bytes (Linux).
func rss(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// TestOutOfMemoryLeaks is DESIGN.md's QuickJS trap: a VM that runs out of
// memory while converting a non-ASCII string (the engine's
// JS_ToCStringLen2) must not leak. Many VMs each run out of memory on that
// path and on others, and are closed; the process must not keep their
// memory.
func TestOutOfMemoryLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few GiB in total")
	}
	if testutil.RaceEnabled {
		// The race detector's shadow memory grows the process with every
		// allocation, so its resident size says nothing about a leak, and
		// a round takes it 14 s of a loaded machine. test.sh runs this
		// test without it, beside the allocation bounds.
		t.Skip("resident memory is not a leak's measure under the race detector: test.sh runs this without -race")
	}
	const rounds = 60
	run := func() {
		vm, err := jsvm.New(jsvm.Limits{MemoryBytes: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Close()
		ctx := context.Background()
		// A non-ASCII string that fills most of the heap, converted to Go:
		// the UTF-8 copy cannot be allocated.
		_, err = eval(ctx, vm, `let s = "é"; while (s.length < 3.5e6) s += s; s`)
		if jsvm.KindOf(err) != jsvm.Memory {
			t.Fatalf("converting a huge non-ASCII string: %v, want out of memory", err)
		}
		if _, err := eval(ctx, vm, `let a = []; for (;;) a.push("é" + a.length)`); jsvm.KindOf(err) != jsvm.Memory {
			t.Fatalf("push: %v", err)
		}
	}
	run() // warm the allocator
	before := rss(t)
	for range rounds {
		run()
	}
	grew := rss(t) - before
	t.Logf("resident memory grew by %d KiB over %d rounds", grew>>10, rounds)
	// Each round takes 16 MiB at its peak; a leak of even a tenth of a
	// round's heap per round would grow the process by 96 MiB.
	if grew > 48<<20 {
		t.Errorf("resident memory grew by %d MiB over %d rounds of out-of-memory VMs", grew>>20, rounds)
	}
}

// earlyDeadline is a context whose deadline comes before it ends, as
// when the engine's own timer, armed from the deadline, fires before the
// context's timer goroutine has marked it done: deterministically.
type earlyDeadline struct {
	context.Context
	d time.Time
}

func (c earlyDeadline) Deadline() (time.Time, bool) { return c.d, true }

// TestInterruptCaught: an async function turns the engine's interrupt
// into a rejection that its caller may catch and go on from; the Run is
// stopped all the same, and the engine's timer firing before the
// context's end counts as the deadline.
func TestInterruptCaught(t *testing.T) {
	vm := newVM(t, jsvm.Limits{})
	// The context ends 10 s after its deadline, which no correct run
	// reaches: the Run must end at the deadline, 100 ms from now.
	parent, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx := earlyDeadline{parent, time.Now().Add(100 * time.Millisecond)}
	var out any
	err := vm.Run(ctx, func(q *quickjs.VM) error {
		if _, err := q.Eval(`globalThis.r = "pending"; (async () => { try { await (async () => { for (;;) {} })() } catch (e) { r = "caught " + e } })()`, quickjs.EvalGlobal); err != nil {
			return err
		}
		if _, err := q.ExecutePendingJobs(); err != nil {
			return err
		}
		var err error
		out, err = q.Eval(`r`, quickjs.EvalGlobal)
		return err
	})
	if jsvm.KindOf(err) != jsvm.Timeout {
		t.Fatalf("Run gave %v (%v), want a timeout", err, out)
	}
}
