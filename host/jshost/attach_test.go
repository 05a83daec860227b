package jshost_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// TestAttachFailures: everything that can be wrong with a payload fails
// the attach receipt, with a code and a reason, never the first call.
func TestAttachFailures(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, nil)
	env := newEnv(t, fsProvider(t.TempDir()))
	good := payload{name: "t.good", src: register + `register({ name: "t.good", requires: [], run: () => 1 });`}
	tests := []struct {
		name string
		p    payload
		edit func(path string) // changes the artifact on disk after writing it
		bind map[string]json.RawMessage
		code protocol.Code
		msg  string
	}{
		{name: "broken bundle", p: payload{name: "t.broken", src: `export default {;`}, code: protocol.CodeInvalidRequest, msg: "payload does not compile: SyntaxError"},
		{name: "module throws", p: payload{name: "t.throws", src: `throw new Error("at load")`}, code: protocol.CodeInvalidRequest, msg: "at load"},
		{name: "no tool", p: payload{name: "t.none", src: `export default 1;`}, code: protocol.CodeInvalidRequest, msg: "defined no tool"},
		{name: "two tools", p: payload{name: "t.two", src: register + `register({ name: "t.two", requires: [], run() {} }); register({ name: "x", requires: [], run() {} });`}, code: protocol.CodeInvalidRequest, msg: "more than one tool"},
		{name: "another name", p: payload{name: "t.named", src: register + `register({ name: "other", requires: [], run() {} });`}, code: protocol.CodeInvalidRequest, msg: `defines the tool "other"`},
		{name: "requires differ from the manifest", p: payload{name: "t.req", src: register + `register({ name: "t.req", requires: ["fs"], run() {} });`}, code: protocol.CodeInvalidRequest, msg: "requires [fs], the manifest []"},
		{name: "handle not provided", p: payload{name: "t.exec", requires: []handle.Kind{handle.KindExec}, src: register + `register({ name: "t.exec", requires: ["exec"], run() {} });`}, code: protocol.CodeUnavailable, msg: "exec"},
		{name: "missing binding", p: payload{name: "t.bind", bindings: map[string]string{"token": `{"type":"string"}`}, src: register + `register({ name: "t.bind", requires: [], bindings: { token: {} }, run() {} });`}, code: protocol.CodeInvalidInput, msg: `binding "token" has no value`},
		{name: "init throws", p: payload{name: "t.init", src: register + `register({ name: "t.init", requires: [], init() { const e = new Error("no credentials"); e.code = "unauthorized"; throw e }, run() {} });`}, code: "unauthorized", msg: "init: no credentials"},
		{name: "init rejects", p: payload{name: "t.initasync", src: register + `register({ name: "t.initasync", requires: [], async init() { throw new Error("later") }, run() {} });`}, code: protocol.CodeToolError, msg: "provision: init: later"},
		{name: "module loops forever", p: payload{name: "t.loop", src: `for (;;) {}`}, code: protocol.CodeTimeout, msg: "deadline"},
		{name: "top-level await never settles", p: payload{name: "t.tla", src: register + `register({ name: "t.tla", requires: [], run: () => 1 }); await new Promise(() => {});`}, code: protocol.CodeInvalidRequest, msg: "evaluate the payload's module: the module's top-level await never settled"},
		{name: "module imports", p: payload{name: "t.import", src: `import fs from "fs"; export default fs;`}, code: protocol.CodeInvalidRequest, msg: "fs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.p.write(t, dir)
			a, err := h.LoadManifest(path)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			rec := env.Attach(ctx, kernel.Attachment{Tool: a, Bindings: tc.bind})
			if rec.OK() || len(rec.Failures) != 1 {
				t.Fatalf("receipt %+v, want one failure", rec)
			}
			f := rec.Failures[0]
			if f.Code != tc.code || !strings.Contains(f.Reason, tc.msg) {
				t.Fatalf("failure %s: %q, want %s containing %q", f.Code, f.Reason, tc.code, tc.msg)
			}
			if strings.Contains(f.Reason, string(f.Code)+": ") {
				t.Fatalf("failure %s: %q repeats its code", f.Code, f.Reason)
			}
		})
	}
	t.Run("unknown identity", func(t *testing.T) {
		m := tool.Manifest{Format: tool.Format, Name: "t.unknown", InputSchema: json.RawMessage(`{"type":"object"}`), Requires: []handle.Kind{},
			BindingNames: []string{}, Hosting: tool.HostingProvisioned, Runtime: tool.RuntimeJS, Payload: jshost.Identity([]byte("never added"))}
		rec := env.Attach(context.Background(), kernel.Attachment{Tool: h.Artifact(m)})
		if rec.OK() || rec.Failures[0].Code != protocol.CodeNotFound {
			t.Fatalf("receipt %+v, want not_found", rec)
		}
	})
	t.Run("bytes that do not match", func(t *testing.T) {
		path := good.write(t, dir)
		if err := os.WriteFile(jshost.PayloadPath(path), []byte(good.src+"\n// changed"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := h.LoadManifest(path); err == nil || !strings.Contains(err.Error(), "does not match its identity") {
			t.Fatalf("LoadManifest = %v, want a mismatch", err)
		}
		if err := h.AddPayload(jshost.Identity([]byte(good.src)), []byte("other bytes")); err == nil {
			t.Fatal("AddPayload accepted bytes that are not what the identity names")
		}
	})
	t.Run("wrong runtime", func(t *testing.T) {
		path := good.write(t, dir)
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"js/1"`, `"wasm/2"`, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := h.LoadManifest(path); err == nil || !strings.Contains(err.Error(), `runtime "wasm/2", want "js/1"`) {
			t.Fatalf("LoadManifest = %v", err)
		}
	})
	t.Run("a binding's default", func(t *testing.T) {
		// The schema's default (zod's .default(443)) stands in for a value
		// not given; one given wins.
		p := payload{name: "t.port", bindings: map[string]string{"port": `{"type":"integer","default":443}`}, src: register + `
register({ name: "t.port", requires: [], bindings: { port: {} }, run: (ctx) => ctx.bindings.port });`}
		path := p.write(t, dir)
		attach(t, env, h, path, nil)
		wantOutcome(t, env.Invoke(context.Background(), "t.port", kernel.Call{Input: json.RawMessage(`{}`)}), `443`, "", "")
		env2 := newEnv(t)
		attach(t, env2, h, path, map[string]json.RawMessage{"port": json.RawMessage(`8443`)})
		wantOutcome(t, env2.Invoke(context.Background(), "t.port", kernel.Call{Input: json.RawMessage(`{}`)}), `8443`, "", "")
	})
	t.Run("top-level await that settles", func(t *testing.T) {
		p := payload{name: "t.tlaok", src: register + `const v = await Promise.resolve(2); register({ name: "t.tlaok", requires: [], run: () => v });`}
		attach(t, env, h, p.write(t, dir), nil)
		wantOutcome(t, env.Invoke(context.Background(), "t.tlaok", kernel.Call{Input: json.RawMessage(`{}`)}), `2`, "", "")
	})
	t.Run("bindings and init", func(t *testing.T) {
		p := payload{name: "t.bound", bindings: map[string]string{"token": `{"type":"string"}`}, src: register + `
let seen;
register({ name: "t.bound", requires: [], bindings: { token: {} },
  init(ctx) { seen = ctx.bindings.token.length; },
  run(ctx) { return { len: seen, token: ctx.bindings.token === "s3cret", keys: Object.keys(ctx).sort() }; } });`}
		attach(t, env, h, p.write(t, dir), map[string]json.RawMessage{"token": json.RawMessage(`"s3cret"`)})
		out := env.Invoke(context.Background(), "t.bound", kernel.Call{Input: json.RawMessage(`{}`)})
		wantOutcome(t, out, `{"len":6,"token":true,"keys":["bindings","callId","deadline","handles","options","progress","requestId","session","signal","workspace"]}`, "", "")
	})
}

// TestSessions: each session has a realm of its own, so module-scope
// state does not pass between sessions; a global a call sets is gone in
// the next call; EndSession frees the realm.
func TestSessions(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, nil)
	a, err := h.LoadManifest(payload{name: "t.state", src: register + `
let last = null;
register({ name: "t.state", requires: [], run(ctx, input) {
  const prev = last;
  last = input.v;
  const leaked = typeof globalThis.leak;
  globalThis.leak = input.v;
  (0, eval)("var viaEval = 1");
  return { prev, leaked, viaEval: typeof viaEval, session: ctx.session ?? null };
} });`}.write(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := a.Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	ender, ok := inst.(tool.SessionEnder)
	if !ok {
		t.Fatalf("%T is not a tool.SessionEnder", inst)
	}
	call := func(session, v string, want string) {
		t.Helper()
		out, err := inst.Invoke(context.Background(), &tool.Call{ID: "c", Session: session, Input: json.RawMessage(`{"v":"` + v + `"}`)})
		wantOutcome(t, protocol.Outcome{Value: out, Err: errOf(err)}, want, "", "")
	}
	call("alice", "a1", `{"prev":null,"leaked":"undefined","viaEval":"number","session":"alice"}`)
	call("alice", "a2", `{"prev":"a1","leaked":"undefined","viaEval":"number","session":"alice"}`)
	call("bob", "b1", `{"prev":null,"leaked":"undefined","viaEval":"number","session":"bob"}`)
	call("", "n1", `{"prev":null,"leaked":"undefined","viaEval":"number","session":null}`)
	ender.EndSession("alice")
	call("alice", "a3", `{"prev":null,"leaked":"undefined","viaEval":"number","session":"alice"}`)
	call("bob", "b2", `{"prev":"b1","leaked":"undefined","viaEval":"number","session":"bob"}`)
}

// TestGlobalsTidied: a global a call adds is gone in the next call, also
// when the call deleted another (the count stays the same), and for
// symbol and integer keys.
func TestGlobalsTidied(t *testing.T) {
	h := newHost(t, nil)
	env := newEnv(t)
	attach(t, env, h, payload{name: "t.globals", src: register + `
register({ name: "t.globals", requires: [], run(ctx, input) {
  const seen = [typeof globalThis.added, Object.getOwnPropertySymbols(globalThis).length, typeof globalThis[7]];
  if (input.step === 1) { delete globalThis.escape; globalThis.added = 1; }
  if (input.step === 2) { globalThis[Symbol("s")] = 1; }
  if (input.step === 3) { globalThis[7] = "seven"; delete globalThis.unescape; }
  return seen;
} });`}.write(t, t.TempDir()), nil)
	for step, want := range []string{`["undefined",1,"undefined"]`, `["undefined",1,"undefined"]`, `["undefined",1,"undefined"]`, `["undefined",1,"undefined"]`, `["undefined",1,"undefined"]`} {
		out := env.Invoke(context.Background(), "t.globals", kernel.Call{Input: json.RawMessage(`{"step":` + itoa(step) + `}`)})
		wantOutcome(t, out, want, "", "")
	}
}

func errOf(err error) *protocol.Error {
	if err == nil {
		return nil
	}
	return protocol.OutcomeOf(err).Err
}

func TestCancel(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, nil)
	env := newEnv(t)
	attach(t, env, h, payload{name: "t.spin", src: register + `register({ name: "t.spin", requires: [], run(ctx, i) { if (i.spin) for (;;) {} return "ok" } });`}.write(t, dir), nil)
	ctx, cancel := context.WithCancel(context.Background())
	// Whether the cancel lands before or while the loop runs, the call
	// must end cancelled.
	stop := time.AfterFunc(30*time.Millisecond, cancel)
	defer stop.Stop()
	wantOutcome(t, env.Invoke(ctx, "t.spin", kernel.Call{Input: json.RawMessage(`{"spin":true}`)}), "", protocol.CodeCancelled, "cancelled")
	wantOutcome(t, env.Invoke(context.Background(), "t.spin", kernel.Call{Input: json.RawMessage(`{}`)}), `"ok"`, "", "")
}

// TestRealmsMemoryBudget: the realms a host keeps hold at most
// RealmsMemoryMiB together: past it the least recently used realm not
// running a call is freed, and its session starts afresh at its next
// call. Each call here leaves 3 MiB in its realm; a budget of 4 MiB keeps
// one such realm, the default keeps both. A probe's sessions each kept 30
// MiB in their realms, with no bound but 256 realms of 64 MiB a tool.
func TestRealmsMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		budget    int
		aliceKept bool
	}{{4, false}, {0, true}} {
		h := newHost(t, &jshost.Options{RealmsMemoryMiB: tc.budget})
		a, err := h.LoadManifest(payload{name: "t.hold", src: register + `
let last = null, held = null;
register({ name: "t.hold", requires: [], run(ctx, input) {
  const prev = last;
  last = input.v;
  held = input.v.repeat(3 << 20);
  return { prev };
} });`}.write(t, t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		inst, err := a.Provision(context.Background(), tool.Handles{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		call := func(session, v, want string) {
			t.Helper()
			out, err := inst.Invoke(context.Background(), &tool.Call{ID: "c", Session: session, Input: json.RawMessage(`{"v":"` + v + `"}`)})
			wantOutcome(t, protocol.Outcome{Value: out, Err: errOf(err)}, want, "", "")
		}
		call("alice", "a", `{"prev":null}`)
		call("alice", "b", `{"prev":"a"}`)
		call("bob", "c", `{"prev":null}`)
		realms := inst.(interface{ Sessions() int }).Sessions()
		if tc.aliceKept {
			if realms != 2 {
				t.Fatalf("default budget: %d realms, want alice's and bob's", realms)
			}
			call("alice", "d", `{"prev":"b"}`)
		} else {
			if realms != 1 {
				t.Fatalf("4 MiB budget: %d realms after bob's call, want bob's alone", realms)
			}
			call("alice", "d", `{"prev":null}`) // afresh
		}
		_ = inst.Close()
	}
}
