package jshost_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/tool"
)

func TestMain(m *testing.M) {
	proc.RunHelperIfRequested() // first: as root, exec children re-run this binary
	os.Exit(m.Run())
}

// register is how a hand-written payload registers its tool, as the SDK's
// tool() does.
const register = `const register = globalThis[Symbol.for("brain.register")];` + "\n"

// payload is one hand-written JavaScript artifact.
type payload struct {
	name     string
	requires []handle.Kind
	bindings map[string]string // name → JSON Schema
	input    string            // input JSON Schema; default an open object
	src      string
}

// write writes p as <name>.tool.json and <name>.mjs under dir and returns
// the manifest's path.
func (p payload) write(t testing.TB, dir string) string {
	t.Helper()
	m := tool.Manifest{Format: tool.Format, Name: p.name, Description: "a test tool", Hosting: tool.HostingProvisioned,
		InputSchema: json.RawMessage(`{"type":"object"}`), Requires: p.requires, BindingNames: []string{},
		Runtime: tool.RuntimeJS, Payload: jshost.Identity([]byte(p.src))}
	if m.Requires == nil {
		m.Requires = []handle.Kind{}
	}
	if p.input != "" {
		m.InputSchema = json.RawMessage(p.input)
	}
	if len(p.bindings) > 0 {
		m.BindingSchemas = map[string]json.RawMessage{}
		for n, s := range p.bindings {
			m.BindingNames = append(m.BindingNames, n)
			m.BindingSchemas[n] = json.RawMessage(s)
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, p.name+".tool.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jshost.PayloadPath(path), []byte(p.src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func newHost(t testing.TB, opts *jshost.Options) *jshost.Host {
	t.Helper()
	h, err := jshost.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newEnv sets up an environment with providers and closes it with the test.
func newEnv(t testing.TB, providers ...kernel.Provider) *kernel.Environment {
	t.Helper()
	env := kernel.New(&kernel.Options{CallTimeout: 10 * time.Second})
	for _, p := range providers {
		if err := env.Provide(p); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = env.Close() })
	if rec := env.Setup(context.Background()); len(rec.Failures) > 0 {
		t.Fatalf("setup: %+v", rec.Failures)
	}
	return env
}

func fsProvider(root string) kernel.Provider {
	return kernel.Provider{Kind: handle.KindFS, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		fs, err := fsroot.New(fsroot.Grants{Root: root})
		if err != nil {
			return nil, err
		}
		return kernel.Static(fs, fs.Close), nil
	}}
}

func execProvider(g proc.Grants) kernel.Provider {
	if os.Geteuid() != 0 {
		g.Network = true
	}
	return kernel.Provider{Kind: handle.KindExec, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		e, err := proc.New(g, nil)
		if err != nil {
			return nil, err
		}
		return kernel.Static(e, e.Close), nil
	}}
}

// attach loads the artifact at path into env through h and fails the
// test unless it attached.
func attach(t testing.TB, env *kernel.Environment, h *jshost.Host, path string, bindings map[string]json.RawMessage) {
	t.Helper()
	a, err := h.LoadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec := env.Attach(context.Background(), kernel.Attachment{Tool: a, Bindings: bindings}); !rec.OK() {
		t.Fatalf("attach: %+v", rec.Failures)
	}
}

// wantOutcome checks an outcome: a value equal (as JSON) to want, or an
// error with code whose message contains msg.
func wantOutcome(t testing.TB, out protocol.Outcome, want string, code protocol.Code, msg string) {
	t.Helper()
	if code == "" {
		if out.Err != nil {
			t.Fatalf("error %s: %s, want %s", out.Err.Code, out.Err.Message, want)
		}
		var a, b any
		if err := json.Unmarshal(out.Value, &a); err != nil {
			t.Fatalf("value %s: %v", out.Value, err)
		}
		_ = json.Unmarshal([]byte(want), &b)
		aj, _ := json.Marshal(a)
		bj, _ := json.Marshal(b)
		if string(aj) != string(bj) {
			t.Fatalf("value %s, want %s", out.Value, want)
		}
		return
	}
	if out.Err == nil {
		t.Fatalf("value %s, want error %s", out.Value, code)
	}
	if out.Err.Code != code || !strings.Contains(out.Err.Message, msg) {
		t.Fatalf("error %s: %q, want %s containing %q", out.Err.Code, out.Err.Message, code, msg)
	}
}

const echo = register + `
let calls = 0;
register({
  name: "t.echo", requires: [], bindings: {},
  run(ctx, input) { calls++; return { echo: input, calls, callId: ctx.callId, hasDeadline: typeof ctx.deadline === "number" }; },
});
export default {};
`

func TestInvoke(t *testing.T) {
	calls = map[string]int{} // the call ids count from c1 in each run (-count=2 ran on from the first's)
	dir := t.TempDir()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("héllo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(ws), "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, &jshost.Options{MemoryLimitMiB: 16})
	env := newEnv(t, fsProvider(ws), execProvider(proc.Grants{Root: ws, Allow: []string{"sh", "echo"}, MaxOutputBytes: 16, Timeout: 2 * time.Second}))
	attach(t, env, h, payload{name: "t.echo", src: echo}.write(t, dir), nil)
	attach(t, env, h, payload{name: "t.strict", input: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`,
		src: register + `register({ name: "t.strict", requires: [], run: (ctx, { n }) => n * 2 });`}.write(t, dir), nil)
	attach(t, env, h, payload{name: "t.throw", src: register + `
class RateLimited extends Error { constructor(m) { super(m); this.code = "rate_limited"; } }
register({ name: "t.throw", requires: [], async run(ctx, input) {
  if (input.kind === "code") throw new RateLimited("retry in 30s");
  if (input.kind === "type") null.x;
  if (input.kind === "badcode") { const e = new Error("bad"); e.code = "Not An Identifier"; throw e; }
  if (input.kind === "null") throw null;
  if (input.kind === "undeclared") return ctx.handles.exec.run({ program: "true" });
  if (input.kind === "keys") return { keys: Object.keys(ctx.handles), json: JSON.stringify(ctx.handles), has: "exec" in ctx.handles, frozen: Object.isFrozen(ctx.handles) };
  if (input.kind === "protohas") { // a trap the payload adds to Object.prototype is not the handles' own
    Object.defineProperty(Object.prototype, "has", { value: () => true, configurable: true });
    try { return { has: "exec" in ctx.handles }; } finally { delete Object.prototype.has; }
  }
  throw new Error("boom");
} });`}.write(t, dir), nil)
	attach(t, env, h, payload{name: "t.limits", src: register + `
register({ name: "t.limits", requires: [], run(ctx, input) {
  switch (input.kind) {
  case "loop": for (;;) {}
  case "regexp": return /^(a+)+(?=b)/.test("a".repeat(40));
  case "doubling": { let s = "x"; for (;;) s += s; }
  case "array": { const a = []; for (;;) a.push({ n: a.length, s: "x".repeat(1000) + a.length }); }
  case "join": return Array(1e5).fill("x".repeat(1000)).join("").length;
  case "recursion": { const f = (n) => f(n + 1) + 1; return f(0); }
  case "pending": return new Promise(() => {});
  case "ok": return "fine";
  }
} });`}.write(t, dir), nil)
	attach(t, env, h, payload{name: "t.fs", requires: []handle.Kind{handle.KindFS}, src: register + `
register({ name: "t.fs", requires: ["fs"], async run({ handles }, input) {
  try {
    const b = await handles.fs.readFile(input.path);
    return { bytes: b.length, first: b[0] };
  } catch (e) {
    if (input.rethrow) throw e;
    return { code: e.code, name: e.name, handle: e.handle, op: e.op };
  }
} });`}.write(t, dir), nil)
	attach(t, env, h, payload{name: "t.exec", requires: []handle.Kind{handle.KindExec}, src: register + `
register({ name: "t.exec", requires: ["exec"], async run({ handles }, input) {
  const r = await handles.exec.run({ program: "sh", args: ["-c", input.script], maxOutput: 1 << 20, timeoutMs: input.timeoutMs });
  return { exitCode: r.exitCode, stdout: r.stdout.length, truncated: r.truncated };
} });`}.write(t, dir), nil)

	tests := []struct {
		name, tool, input string
		timeout           time.Duration
		want              string
		code              protocol.Code
		msg               string
		// slow marks work that grows step by step to its limit: under the
		// race detector the transpiled engine runs about ten times slower,
		// and the call's deadline (3 s then) may come first.
		slow bool
	}{
		{name: "happy path", tool: "t.echo", input: `{"a":[1,"é"]}`, want: `{"echo":{"a":[1,"é"]},"calls":1,"callId":"c1","hasDeadline":true}`},
		{name: "module scope is kept", tool: "t.echo", input: `{}`, want: `{"echo":{},"calls":2,"callId":"c2","hasDeadline":true}`},
		{name: "valid input", tool: "t.strict", input: `{"n":21}`, want: `42`},
		{name: "invalid input", tool: "t.strict", input: `{"n":"x"}`, code: protocol.CodeInvalidInput, msg: "/n"},
		{name: "thrown error keeps its code", tool: "t.throw", input: `{"kind":"code"}`, code: "rate_limited", msg: "retry in 30s"},
		{name: "thrown TypeError", tool: "t.throw", input: `{"kind":"type"}`, code: protocol.CodeToolError, msg: "TypeError: cannot read property 'x' of null"},
		{name: "thrown Error", tool: "t.throw", input: `{}`, code: protocol.CodeToolError, msg: "boom"},
		{name: "a code that is no identifier", tool: "t.throw", input: `{"kind":"badcode"}`, code: protocol.CodeToolError, msg: "bad"},
		{name: "thrown null", tool: "t.throw", input: `{"kind":"null"}`, code: protocol.CodeToolError, msg: "threw null"},
		{name: "an undeclared handle", tool: "t.throw", input: `{"kind":"undeclared"}`, code: protocol.CodeToolError, msg: `TypeError: ctx.handles.exec: the handle "exec" is not in this tool's requires ([]): add "exec" to requires in tool()`},
		{name: "undeclared handles are not listed", tool: "t.throw", input: `{"kind":"keys"}`, want: `{"keys":[],"json":"{}","has":false,"frozen":true}`},
		{name: "the handles' proxy keeps its own traps", tool: "t.throw", input: `{"kind":"protohas"}`, want: `{"has":false}`},
		{name: "infinite loop", tool: "t.limits", input: `{"kind":"loop"}`, timeout: 200 * time.Millisecond, code: protocol.CodeTimeout, msg: "deadline"},
		{name: "serves after a timeout", tool: "t.limits", input: `{"kind":"ok"}`, want: `"fine"`},
		{name: "catastrophic regexp", tool: "t.limits", input: `{"kind":"regexp"}`, timeout: 200 * time.Millisecond, code: protocol.CodeTimeout},
		{name: "string doubling", tool: "t.limits", input: `{"kind":"doubling"}`, code: protocol.CodeTooLarge, msg: "memory limit of 16 MiB", slow: true},
		{name: "memory bomb", tool: "t.limits", input: `{"kind":"array"}`, code: protocol.CodeTooLarge, msg: "memory limit", slow: true},
		{name: "join amplification", tool: "t.limits", input: `{"kind":"join"}`, code: protocol.CodeTooLarge, msg: "memory limit", slow: true},
		{name: "deep recursion", tool: "t.limits", input: `{"kind":"recursion"}`, code: protocol.CodeTooLarge, msg: "call stack", slow: true},
		{name: "serves after the limits", tool: "t.limits", input: `{"kind":"ok"}`, want: `"fine"`},
		{name: "a promise that never settles", tool: "t.limits", input: `{"kind":"pending"}`, code: protocol.CodeToolError, msg: "never settled"},
		{name: "fs read", tool: "t.fs", input: `{"path":"notes.txt"}`, want: `{"bytes":6,"first":104}`},
		{name: "fs escape caught", tool: "t.fs", input: `{"path":"../secret.txt"}`, want: `{"code":"path_escape","name":"CapabilityError","handle":"fs","op":"read_file"}`},
		{name: "fs escape uncaught", tool: "t.fs", input: `{"path":"../secret.txt","rethrow":true}`, code: protocol.CodePathEscape, msg: "fs read_file: the path"},
		{name: "exec clamped to the grant's output cap", tool: "t.exec", input: `{"script":"echo 0123456789abcdefghij"}`, want: `{"exitCode":0,"stdout":16,"truncated":true}`},
		// A negative timeoutMs is the handle's to refuse, as Go's is; it
		// ran with the grant's timeout.
		{name: "exec with a negative timeoutMs", tool: "t.exec", input: `{"script":"true","timeoutMs":-5}`, code: protocol.CodeInvalidArgument, msg: "is negative"},
		{name: "exec with a timeoutMs that is no number", tool: "t.exec", input: `{"script":"true","timeoutMs":"5"}`, code: protocol.CodeInvalidArgument, msg: "timeoutMs 5 is not a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.slow && testutil.RaceEnabled {
				tc.timeout = 3 * time.Second
			}
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			out := env.Invoke(ctx, tc.tool, kernel.Call{ID: "c" + itoa(countCalls(tc.tool)), Input: json.RawMessage(tc.input)})
			if tc.slow && testutil.RaceEnabled && out.Err != nil && out.Err.Code == protocol.CodeTimeout {
				return
			}
			wantOutcome(t, out, tc.want, tc.code, tc.msg)
		})
	}
}

var calls = map[string]int{}

func countCalls(tool string) int { calls[tool]++; return calls[tool] }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
