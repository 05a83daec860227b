package jshost_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/tool"
)

// provision writes p, loads it through a host under opts and provisions
// it with hs; the instance is closed with the test.
func provision(t *testing.T, opts *jshost.Options, p payload, hs tool.Handles) tool.Instance {
	t.Helper()
	a, err := newHost(t, opts).LoadManifest(p.write(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := a.Provision(context.Background(), hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

func fsHandle(t *testing.T, root string) handle.FS {
	t.Helper()
	fs, err := fsroot.New(fsroot.Grants{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	return fs
}

// invoke makes one call of inst in session with handles hs and returns
// its outcome.
func invoke(ctx context.Context, inst tool.Instance, hs tool.Handles, session, id, input string) protocol.Outcome {
	v, err := inst.Invoke(ctx, &tool.Call{ID: id, Session: session, Input: json.RawMessage(input), Handles: hs})
	if err != nil {
		return protocol.OutcomeOf(err)
	}
	return protocol.Outcome{Value: v}
}

// earlyDeadline is a context whose deadline comes before it ends, as
// when the engine's own timer, armed from the deadline, fires before the
// context's timer goroutine has marked it done: deterministically.
type earlyDeadline struct {
	context.Context
	d time.Time
}

func (c earlyDeadline) Deadline() (time.Time, bool) { return c.d, true }

// TestInterruptCaughtInAsyncCode: the engine's interrupt, which an async
// function turns into a rejection its caller may catch, still ends the
// call timeout; no handle operation runs after it; the realm is dropped.
func TestInterruptCaughtInAsyncCode(t *testing.T) {
	ws := t.TempDir()
	hs := tool.Handles{FS: fsHandle(t, ws)}
	inst := provision(t, nil, payload{name: "t.catch", requires: []handle.Kind{handle.KindFS}, src: register + `
let state = "fresh";
register({ name: "t.catch", requires: ["fs"], async run({ handles }, input) {
  if (input.peek) return state;
  state = "torn by a call stopped at its deadline";
  try {
    await (async () => { for (;;) {} })();
  } catch (e) {
    try { await handles.fs.writeFile("after.txt", "written after the interrupt: " + e); } catch (x) {}
    return "caught " + e;
  }
} });`}, hs)
	if out := invoke(context.Background(), inst, hs, "s", "c1", `{"peek":true}`); out.Err != nil || string(out.Value) != `"fresh"` {
		t.Fatalf("first call: %+v", out)
	}
	// The context ends 10 s after its deadline (a bound no correct run
	// reaches: the call must end at the deadline, 100 ms from now).
	parent, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx := earlyDeadline{parent, time.Now().Add(100 * time.Millisecond)}
	out := invoke(ctx, inst, hs, "s", "c2", `{}`)
	if out.Err == nil || out.Err.Code != protocol.CodeTimeout {
		t.Fatalf("the call caught its interrupt: %+v (%s), want timeout", out.Err, out.Value)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "after.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a handle operation ran after the interrupt: %q (%v)", b, err)
	}
	if out := invoke(context.Background(), inst, hs, "s", "c3", `{"peek":true}`); out.Err != nil || string(out.Value) != `"fresh"` {
		t.Fatalf("the stopped realm was kept: %+v %s", out.Err, out.Value)
	}
}

// TestSpinningBuiltinStops: a built-in that loops over a huge length in
// C without calling script code or allocating stops at the deadline: its
// realm is freed (its engine returned) soon after the call's timeout,
// rather than spinning on a core for 2**53 steps.
func TestSpinningBuiltinStops(t *testing.T) {
	hs := tool.Handles{}
	inst := provision(t, nil, payload{name: "t.spin", src: register + `
register({ name: "t.spin", requires: [], run(ctx, input) {
  const huge = { length: 2 ** 53 - 1 };
  switch (input.kind) {
  case "indexOf": return Array.prototype.indexOf.call(huge, 1);
  case "includes": return Array.prototype.includes.call(huge, 1);
  case "lastIndexOf": return Array.prototype.lastIndexOf.call(huge, 1);
  case "reverse": Array.prototype.reverse.call(huge); return 0;
  case "copyWithin": Array.prototype.copyWithin.call(huge, 1, 0); return 0;
  case "sparse": return Array(2 ** 32 - 1).indexOf(1);
  case "proxy": return Array.prototype.includes.call(new Proxy([], { get: (t, k) => k === "length" ? 2 ** 53 - 1 : t[k] }), 1);
  case "forEach": { let n = 0; Array.prototype.forEach.call(huge, () => n++); return n; }
  case "join": return Array.prototype.join.call(huge, "").length;
  case "concat": return [].concat({ length: 2 ** 53 - 1, [Symbol.isConcatSpreadable]: true }).length;
  case "concatThis": return Array.prototype.concat.call({ length: 2 ** 53 - 2, [Symbol.isConcatSpreadable]: true }).length;
  case "ok": return [3, 1, 2].indexOf(2) + [1, 2].includes(2) + Array.prototype.indexOf.call({ length: 3, 2: "x" }, "x") +
    [1].concat([2], 3, { length: 1, 0: 4, [Symbol.isConcatSpreadable]: true }, { 0: 5 }).length - 5;
  }
} });`}, hs)
	if out := invoke(context.Background(), inst, hs, "warm", "w", `{"kind":"ok"}`); out.Err != nil || string(out.Value) != `5` {
		t.Fatalf("ordinary calls: %+v %s", out.Err, out.Value)
	}
	for _, kind := range []string{"indexOf", "includes", "lastIndexOf", "reverse", "copyWithin", "sparse", "proxy", "forEach", "join", "concat", "concatThis"} {
		// The engine polls its interrupt every few thousand steps of
		// script code (microseconds, some hundred times slower under the
		// race detector on two loaded cores); unstopped, the built-in runs
		// 2**53 steps (years). 20 s tells them apart.
		t.Run(kind, func(t *testing.T) { stopsAndFrees(t, inst, hs, kind) })
	}
}

// TestLeftJobsRunInTheirCall: the promise jobs a call leaves run before
// its outcome, with its handles, not in the session's next call.
func TestLeftJobsRunInTheirCall(t *testing.T) {
	ws := t.TempDir()
	hs := tool.Handles{FS: fsHandle(t, ws)}
	inst := provision(t, nil, payload{name: "t.jobs", requires: []handle.Kind{handle.KindFS}, src: register + `
register({ name: "t.jobs", requires: ["fs"], run({ handles, callId }) {
  Promise.resolve().then(() => handles.fs.writeFile("late-" + callId + ".txt", "by a job of " + callId));
  return "returned sync";
} });`}, hs)
	if out := invoke(context.Background(), inst, hs, "s", "c1", `{}`); out.Err != nil {
		t.Fatal(out.Err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "late-c1.txt")); err != nil || string(b) != "by a job of c1" {
		t.Fatalf("the job of c1 had not run when c1 ended: %q %v", b, err)
	}
}

// TestDirtyGlobals: a call that leaves a global the host cannot delete,
// or changes the global object otherwise, keeps its value and its realm
// is dropped.
func TestDirtyGlobals(t *testing.T) {
	hs := tool.Handles{}
	inst := provision(t, nil, payload{name: "t.dirty", src: register + `
let calls = 0;
register({ name: "t.dirty", requires: [], async run(ctx, input) {
  calls++;
  if (input.how === "permanent") Object.defineProperty(globalThis, "permanent", { value: 1, configurable: false });
  if (input.how === "frozen") Object.preventExtensions(globalThis);
  if (input.how === "proto") Object.setPrototypeOf(globalThis, null);
  if (input.how === "job") Promise.resolve().then(() => Object.defineProperty(globalThis, "late", { value: 1 }));
  return input.async ? Promise.resolve({ calls }) : { calls };
} });`}, hs)
	for _, how := range []string{"permanent", "frozen", "proto", "job"} {
		for _, async := range []bool{false, true} {
			session := how + map[bool]string{false: "-sync", true: "-async"}[async]
			in := `{"how":"` + how + `","async":` + map[bool]string{false: "false", true: "true"}[async] + `}`
			if out := invoke(context.Background(), inst, hs, session, "a", in); out.Err != nil || string(out.Value) != `{"calls":1}` {
				t.Fatalf("%s: %+v %s, want {\"calls\":1}", session, out.Err, out.Value)
			}
			if out := invoke(context.Background(), inst, hs, session, "b", `{}`); out.Err != nil || string(out.Value) != `{"calls":1}` {
				t.Fatalf("%s: the next call: %+v %s, want a fresh realm", session, out.Err, out.Value)
			}
		}
	}
}

// TestThrown: what a tool throws, as its outcome. A limit of the engine
// met while encoding the result (nesting past the call stack) is
// too_large, as when the tool meets it; so is a size past the engine's
// own bounds, uncaught (a tool may catch it).
func TestThrown(t *testing.T) {
	hs := tool.Handles{}
	inst := provision(t, &jshost.Options{MemoryLimitMiB: 16}, payload{name: "t.thrown", src: register + `
class CapabilityError extends Error {
  constructor(code, message) { super(message); this.name = "CapabilityError"; this.code = code; }
}
register({ name: "t.thrown", requires: [], async run(ctx, input) {
  switch (input.kind) {
  case "caperr": throw new CapabilityError("denied", "made by the tool");
  case "null": throw null;
  case "big": return "x".repeat(10 << 20);
  case "deep": { let o = {}; for (let i = 0; i < 100000; i++) o = { o }; return o; }
  case "cyclic": { const o = {}; o.self = o; return o; }
  case "typed": return new Uint8Array(2 ** 31).length;
  case "typedcaught": try { return new Uint8Array(2 ** 31).length; } catch (e) { return String(e); }
  }
} }, { CapabilityError });`}, hs)
	tests := []struct {
		kind string
		code protocol.Code
		msg  string
	}{
		{"caperr", "denied", "made by the tool"},
		{"null", protocol.CodeToolError, `the tool "t.thrown" threw null`},
		{"big", protocol.CodeTooLarge, "memory limit of 16 MiB"},
		{"deep", protocol.CodeTooLarge, "call stack limit"},
		{"cyclic", protocol.CodeToolError, "the result cannot be encoded as JSON"},
		{"typed", protocol.CodeTooLarge, "size limit of the engine: RangeError: invalid array buffer length"},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			out := invoke(context.Background(), inst, hs, "s", "c", `{"kind":"`+tc.kind+`"}`)
			if out.Err == nil || out.Err.Code != tc.code || !strings.Contains(out.Err.Message, tc.msg) || (tc.kind == "caperr" && out.Err.Message != tc.msg) {
				t.Fatalf("%+v %s, want %s: %q", out.Err, out.Value, tc.code, tc.msg)
			}
		})
	}
	if out := invoke(context.Background(), inst, hs, "s", "c", `{"kind":"typedcaught"}`); out.Err != nil || string(out.Value) != `"RangeError: invalid array buffer length"` {
		t.Fatalf("a size limit caught: %+v %s", out.Err, out.Value)
	}
}

// TestSpreadingBuiltinStops: flat, flatMap and concat, whose loops in C
// walk not only their receiver but each array they flatten or spread,
// stop at the deadline when the length is there: in one element or
// argument (2**32 - 1 holes), or in many, each within the bound but not
// their sum. Their realm is freed soon after the call's timeout, as in
// TestSpinningBuiltinStops.
func TestSpreadingBuiltinStops(t *testing.T) {
	hs := tool.Handles{}
	// 4 MiB: the bound on a genuine array's length is 262,144 elements (16
	// bytes each), m's length; ms holds it 60,000 times. concat is given
	// 5,000 of them: each goes in as a Proxy, and 60,000 Proxies would not
	// fit in the realm's memory.
	inst := provision(t, &jshost.Options{MemoryLimitMiB: 4}, payload{name: "t.spread", src: register + `
register({ name: "t.spread", requires: [], run(ctx, input) {
  const s = []; s.length = 2 ** 32 - 1;
  const m = []; m.length = 262144;
  const ms = () => Array(60000).fill(m);
  switch (input.kind) {
  case "flat": return [s].flat().length;
  case "flatEach": return Array(1000).fill(s).flat().length;
  case "flatSum": return ms().flat().length;
  case "flatDeep": return [[[s]]].flat(Infinity).length;
  case "flatDeepSum": return [ms()].flat(2).length;
  case "flatProxy": return [new Proxy(s, {})].flat().length;
  case "flatOfArrayLike": return Array.prototype.flat.call({ length: 1, 0: [s] }, 2).length;
  case "flatMap": return [1].flatMap(() => s).length;
  case "flatMapSum": return ms().flatMap((x) => x).length;
  case "concatSum": return Array.prototype.concat.apply([], ms().slice(0, 5000)).length;
  case "concatThisSum": return Array.prototype.concat.apply(m, ms().slice(0, 5000)).length;
  case "bounded": return [[m].flat().length, [].concat(m).length, ms().slice(0, 2).flat().length, [1].flatMap(() => m).length].join();
  case "ok": return [[[1], [2, [3]]].flat(Infinity).length, [1, 2].flatMap((x) => [x, [x]]).length, [1].concat([2], 3).length].join();
  }
} });`}, hs)
	if out := invoke(context.Background(), inst, hs, "warm", "w", `{"kind":"ok"}`); out.Err != nil || string(out.Value) != `"3,4,3"` {
		t.Fatalf("ordinary calls: %+v %s", out.Err, out.Value)
	}
	if out := invoke(context.Background(), inst, hs, "warm", "w", `{"kind":"bounded"}`); out.Err != nil || string(out.Value) != `"0,262144,0,0"` {
		t.Fatalf("calls within the bound: %+v %s", out.Err, out.Value)
	}
	for _, kind := range []string{"flat", "flatEach", "flatSum", "flatDeep", "flatDeepSum", "flatProxy", "flatOfArrayLike", "flatMap", "flatMapSum", "concatSum", "concatThisSum"} {
		// Past the deadline the loop in C runs at most twice the bound
		// (the receiver, one array it copies as it is) before it polls:
		// half a million steps, a few tens of ms here and about 1.3 s
		// under the race detector (50 ns and 2.4 µs a step, measured);
		// unstopped, it runs 1.3 billion steps or more (a minute or more;
		// hours under the race detector). 20 s tells them apart on two
		// loaded cores.
		t.Run(kind, func(t *testing.T) { stopsAndFrees(t, inst, hs, kind) })
	}
}

// stopsAndFrees calls kind in a session of its own with a deadline of
// 100 ms: it must end timeout, its realm must be freed within 20 s (the
// callers say why that bound), and the session's next call must work, in
// a new realm.
func stopsAndFrees(t *testing.T, inst tool.Instance, hs tool.Handles, kind string) {
	t.Helper()
	session := "s-" + kind
	if out := invoke(context.Background(), inst, hs, session, "a", `{"kind":"ok"}`); out.Err != nil {
		t.Fatal(out.Err)
	}
	freed := make(chan struct{})
	if !jshost.OnRealmClose(inst, session, func() { close(freed) }) {
		t.Fatal("no realm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if out := invoke(ctx, inst, hs, session, "b", `{"kind":"`+kind+`"}`); out.Err == nil || out.Err.Code != protocol.CodeTimeout {
		t.Fatalf("%+v %s, want timeout", out.Err, out.Value)
	}
	select {
	case <-freed:
	case <-time.After(20 * time.Second):
		t.Fatal("the realm still runs its built-in 20 s after its call's timeout")
	}
	if out := invoke(context.Background(), inst, hs, session, "c", `{"kind":"ok"}`); out.Err != nil {
		t.Fatal(out.Err)
	}
}

// TestCallQueuedBehindDroppedRealm: a call that waits behind another call
// of its session whose realm is dropped (stopped at its deadline) runs in
// a fresh realm, not in the dropped one.
func TestCallQueuedBehindDroppedRealm(t *testing.T) {
	hs := tool.Handles{}
	inst := provision(t, nil, payload{name: "t.queue", src: register + `
register({ name: "t.queue", requires: [], run(ctx, input) {
  if (input.spin) { ctx.progress(1, 1, "spinning"); for (;;) {} }
  return "ran";
} });`}, hs)
	spinning := make(chan struct{}, 1)
	first := make(chan protocol.Outcome, 1)
	go func() {
		// The first call spins to its deadline; a second long enough that
		// the next call is waiting behind it when it is stopped.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := inst.Invoke(ctx, &tool.Call{ID: "c1", Session: "s", Input: json.RawMessage(`{"spin":true}`), Handles: hs,
			Progress: func(tool.Progress) { spinning <- struct{}{} }})
		first <- protocol.Outcome{Value: v, Err: protocol.OutcomeOf(err).Err}
	}()
	<-spinning
	out := invoke(context.Background(), inst, hs, "s", "c2", `{}`)
	if out.Err != nil || string(out.Value) != `"ran"` {
		t.Fatalf("the call queued behind a dropped realm: %+v %s", out.Err, out.Value)
	}
	if o := <-first; o.Err == nil || o.Err.Code != protocol.CodeTimeout {
		t.Fatalf("the spinning call: %+v %s", o.Err, o.Value)
	}
}

// TestOutOfMemoryIsFinal: a tool that catches the engine's out-of-memory
// error and returns, or goes on, still ends too_large (the realm runs with
// jsvm.Limits.OutOfMemoryStops), and its realm is dropped: the session's
// next call starts in a fresh one. A string past the engine's length
// limit is no failed allocation (the engine's strings are ropes): its
// error may be caught, as V8's RangeError may.
func TestOutOfMemoryIsFinal(t *testing.T) {
	hs := tool.Handles{}
	inst := provision(t, &jshost.Options{MemoryLimitMiB: 16}, payload{name: "t.oom", src: register + `
let calls = 0;
register({ name: "t.oom", requires: [], run(ctx, input) {
  calls++;
  switch (input.kind) {
  case "catch": try { const a = []; for (;;) a.push("x".repeat(1000) + a.length); } catch (e) { return { survived: String(e) }; }
  case "long": try { let s = "x"; for (;;) s += s; } catch (e) { return String(e); }
  case "catch2": { const keep = []; try { for (;;) keep.push(new Array(1e5).fill(1)); } catch (e) { keep.length = 0; return { survived: String(e) }; } }
  case "retry": for (let i = 0; i < 3; i++) { try { const a = []; for (;;) a.push("x".repeat(100) + a.length); } catch (e) {} } return "went on";
  }
  return calls;
} });`}, hs)
	for _, kind := range []string{"catch", "catch2", "retry"} {
		t.Run(kind, func(t *testing.T) {
			session := "s-" + kind
			if out := invoke(context.Background(), inst, hs, session, "a", `{}`); out.Err != nil || string(out.Value) != "1" {
				t.Fatalf("first call: %+v %s", out.Err, out.Value)
			}
			freed := make(chan struct{})
			if !jshost.OnRealmClose(inst, session, func() { close(freed) }) {
				t.Fatal("no realm")
			}
			out := invoke(context.Background(), inst, hs, session, "b", `{"kind":"`+kind+`"}`)
			if out.Err == nil || out.Err.Code != protocol.CodeTooLarge || !strings.Contains(out.Err.Message, "memory limit of 16 MiB") {
				t.Fatalf("%+v %s, want too_large", out.Err, out.Value)
			}
			select {
			case <-freed:
			default:
				t.Fatal("the realm that ran out of memory was kept")
			}
			if out := invoke(context.Background(), inst, hs, session, "c", `{}`); out.Err != nil || string(out.Value) != "1" {
				t.Fatalf("the next call: %+v %s, want 1 (a fresh realm)", out.Err, out.Value)
			}
		})
	}
	if out := invoke(context.Background(), inst, hs, "s-long", "a", `{"kind":"long"}`); out.Err != nil || string(out.Value) != `"InternalError: string too long"` {
		t.Fatalf("a string past the length limit, caught: %+v %s", out.Err, out.Value)
	}
}
