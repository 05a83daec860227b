package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/tool"
)

// fakeExec is an exec handle that records nothing and runs nothing.
type fakeExec struct{}

func (fakeExec) Run(context.Context, handle.Command) (handle.Result, error) {
	return handle.Result{}, nil
}

// newEnv returns a set-up environment providing fs over a temp dir holding
// hello.txt, and exec.
func newEnv(t *testing.T, opts *kernel.Options) *kernel.Environment {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := kernel.New(opts)
	must(t, e.Provide(kernel.Provider{Kind: handle.KindFS, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		fs, err := fsroot.New(fsroot.Grants{Root: root})
		if err != nil {
			return nil, err
		}
		return kernel.Static(fs, fs.Close), nil
	}}))
	must(t, e.Provide(kernel.Provider{Kind: handle.KindExec, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		return kernel.Static(fakeExec{}, nil), nil
	}}))
	rec := e.Setup(context.Background())
	if got := rec.Provides; !reflect.DeepEqual(got, []handle.Kind{handle.KindExec, handle.KindFS}) {
		t.Fatalf("provides = %v", got)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type readIn struct {
	Path string `json:"path" jsonschema:"the file to read, relative to the workspace"`
}
type readOut struct {
	Text string `json:"text"`
}
type fsHandles struct{ FS handle.FS }
type pageHandles struct{ Page handle.Page }
type tokenBindings struct {
	Token string `json:"token" jsonschema:"the API token"`
}

var readTool = tool.New(tool.Spec{Name: "fs.read", Description: "Read a file."},
	func(ctx *tool.Context[fsHandles, tool.None], in readIn) (readOut, error) {
		b, err := ctx.Handles.FS.ReadFile(ctx, in.Path)
		return readOut{Text: string(b)}, err
	})

// behave is a tool whose input says how to end.
type behaveIn struct {
	Do string `json:"do"`
}

var behaveTool = tool.New(tool.Spec{Name: "behave", Description: "Ends as told."},
	func(ctx *tool.Context[tool.None, tool.None], in behaveIn) (map[string]string, error) {
		switch in.Do {
		case "code":
			return nil, tool.Errorf("rate_limited", "slow down")
		case "plain":
			return nil, errors.New("disk on fire")
		case "badcode":
			return nil, tool.Errorf("Not A Code", "weird")
		case "panic":
			panic("boom")
		case "block":
			<-ctx.Done()
			return nil, ctx.Err()
		case "ignore":
			select {} // ignores its context entirely
		}
		return map[string]string{"did": in.Do}, nil
	})

func TestAttachFailures(t *testing.T) {
	tokenTool := tool.New(tool.Spec{Name: "api.call", Description: "Calls an API."},
		func(ctx *tool.Context[tool.None, tokenBindings], in struct{}) (string, error) {
			return ctx.Bindings.Token, nil
		})
	pageTool := tool.New(tool.Spec{Name: "page.text", Description: "Reads a page."},
		func(ctx *tool.Context[pageHandles, tool.None], in struct{}) (string, error) { return "", nil })
	initFails := readTool.WithInit(func(context.Context, fsHandles, tool.None) error { return errors.New("no config") })
	initCode := readTool.WithInit(func(context.Context, fsHandles, tool.None) error {
		return protocol.Errorf("unauthorized", "token expired")
	})
	initPanics := readTool.WithInit(func(context.Context, fsHandles, tool.None) error { panic("init exploded") })
	badManifest := tool.New(tool.Spec{Name: "bad", Description: "d", InputSchema: json.RawMessage(`{"type":7}`)},
		func(ctx *tool.Context[tool.None, tool.None], in struct{}) (string, error) { return "", nil })
	// A probe's artifact of this name attached, and then no session could
	// open: each refused the registration.
	builtinName := tool.New(tool.Spec{Name: session.CapabilitiesListName, Description: "d"},
		func(ctx *tool.Context[tool.None, tool.None], in struct{}) (string, error) { return "", nil })

	tests := []struct {
		name   string
		att    kernel.Attachment
		code   protocol.Code
		reason string
	}{
		{"requires a handle not provided", kernel.Attachment{Tool: pageTool}, protocol.CodeUnavailable, "requires [page], which this environment does not provide"},
		{"missing binding value", kernel.Attachment{Tool: tokenTool}, protocol.CodeInvalidInput, `binding "token" has no value`},
		{"binding fails its schema", kernel.Attachment{Tool: tokenTool, Bindings: map[string]json.RawMessage{"token": json.RawMessage(`42`)}}, protocol.CodeInvalidInput, `binding "token": the value does not match its schema`},
		{"undeclared binding", kernel.Attachment{Tool: tokenTool, Bindings: map[string]json.RawMessage{"token": json.RawMessage(`"t"`), "extra": json.RawMessage(`"x"`)}}, protocol.CodeInvalidInput, `binding "extra" is not declared`},
		// Several: the first in sorted order, every time (map order is random).
		{"undeclared bindings", kernel.Attachment{Tool: tokenTool, Bindings: map[string]json.RawMessage{"token": json.RawMessage(`"t"`), "zz": json.RawMessage(`"x"`), "aa": json.RawMessage(`"x"`), "mm": json.RawMessage(`"x"`)}}, protocol.CodeInvalidInput, `binding "aa" is not declared`},
		// The tool's own failure, not brain's: tool_error, as a call's.
		{"init fails", kernel.Attachment{Tool: initFails}, protocol.CodeToolError, "provision: init: no config"},
		// The code once, in the failure's code, not again in its reason.
		{"init fails with a code", kernel.Attachment{Tool: initCode}, "unauthorized", "provision: init: token expired"},
		{"init panics", kernel.Attachment{Tool: initPanics}, protocol.CodeInternal, "init panicked: init exploded"},
		{"schema does not compile", kernel.Attachment{Tool: badManifest}, protocol.CodeInvalidRequest, "input_schema"},
		{"no tool", kernel.Attachment{}, protocol.CodeInvalidRequest, "no tool given"},
		{"a built-in's name", kernel.Attachment{Tool: builtinName}, protocol.CodeConflict, `"__capabilities.list" is the name of a capability every session has built in`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			rec := e.Attach(context.Background(), tt.att, kernel.Attachment{Tool: readTool})
			if len(rec.Failures) != 1 {
				t.Fatalf("failures = %+v, want exactly one", rec.Failures)
			}
			f := rec.Failures[0]
			if f.Code != tt.code || !strings.Contains(f.Reason, tt.reason) {
				t.Errorf("failure = %+v, want code %s and a reason containing %q", f, tt.code, tt.reason)
			}
			if strings.Contains(f.Reason, string(f.Code)+": ") {
				t.Errorf("failure = %+v: its reason repeats its code", f)
			}
			if !reflect.DeepEqual(rec.Attached, []string{"fs.read"}) {
				t.Errorf("attached = %v: the good tool must still attach", rec.Attached)
			}
			if strings.Contains(f.Reason, `"t"`) {
				t.Errorf("a binding value leaked into the receipt: %s", f.Reason)
			}
		})
	}
	t.Run("already attached", func(t *testing.T) {
		e := newEnv(t, nil)
		e.Attach(context.Background(), kernel.Attachment{Tool: readTool})
		rec := e.Attach(context.Background(), kernel.Attachment{Tool: readTool})
		if len(rec.Failures) != 1 || rec.Failures[0].Code != protocol.CodeConflict || !strings.Contains(rec.Failures[0].Reason, "a config lists it once") {
			t.Errorf("receipt = %+v, want one conflict saying a name attaches once", rec)
		}
	})
	t.Run("a look-alike of an attached name", func(t *testing.T) {
		// Every session would refuse the second tool's registration, and
		// no session could open (as a tool named __capabilities.list did).
		e := newEnv(t, nil)
		e.Attach(context.Background(), kernel.Attachment{Tool: readTool})
		for _, name := range []string{"FS.READ", "\uff46\uff53.\uff52\uff45\uff41\uff44", "__Capabilities.list"} {
			twin := tool.New(tool.Spec{Name: name, Description: "Read a file."},
				func(ctx *tool.Context[fsHandles, tool.None], in struct{}) (string, error) { return "", nil })
			rec := e.Attach(context.Background(), kernel.Attachment{Tool: twin})
			if len(rec.Failures) != 1 || rec.Failures[0].Code != protocol.CodeConflict || !strings.Contains(rec.Failures[0].Reason, "looks like") {
				t.Errorf("%s: receipt = %+v, want a conflict saying it looks like another", name, rec)
			}
		}
	})
	t.Run("not set up", func(t *testing.T) {
		e := kernel.New(nil)
		rec := e.Attach(context.Background(), kernel.Attachment{Tool: readTool})
		if len(rec.Failures) != 1 || rec.Failures[0].Code != protocol.CodeUnavailable {
			t.Errorf("receipt = %+v, want unavailable", rec)
		}
	})
}

func TestSetupReportsFailedProvider(t *testing.T) {
	e := kernel.New(nil)
	must(t, e.Provide(kernel.Provider{Kind: handle.KindPage, Open: func(context.Context, kernel.Instance) (kernel.Provided, error) {
		return nil, &handle.CapabilityError{Handle: handle.KindPage, Op: "setup", Code: protocol.CodeUnavailable, Message: "chromium is not installed"}
	}}))
	rec := e.Setup(context.Background())
	if len(rec.Provides) != 0 || len(rec.Failures) != 1 || rec.Failures[0].Code != protocol.CodeUnavailable ||
		!strings.Contains(rec.Failures[0].Reason, "chromium is not installed") {
		t.Errorf("receipt = %+v", rec)
	}
	if err := e.Provide(kernel.Provider{Kind: handle.KindFS}); err == nil {
		t.Error("Provide after Setup succeeded")
	}
}

func TestInvokeOutcomes(t *testing.T) {
	e := newEnv(t, &kernel.Options{CallTimeout: 200 * time.Millisecond})
	rec := e.Attach(context.Background(), kernel.Attachment{Tool: readTool}, kernel.Attachment{Tool: behaveTool})
	if !rec.OK() {
		t.Fatal(rec.Failures)
	}
	tests := []struct {
		name, tool, input string
		value             string
		code              protocol.Code
		msg               string
	}{
		{"value", "fs.read", `{"path":"hello.txt"}`, `{"text":"hello"}`, "", ""},
		{"handle error keeps its code", "fs.read", `{"path":"../etc/passwd"}`, "", protocol.CodePathEscape, ""},
		{"unknown tool", "nope", `{}`, "", protocol.CodeNotFound, `no tool named "nope"`},
		{"invalid input", "fs.read", `{"path":7}`, "", protocol.CodeInvalidInput, `at "/path"`},
		{"missing input field", "fs.read", `{}`, "", protocol.CodeInvalidInput, "missing property 'path'"},
		{"identifier code preserved", "behave", `{"do":"code"}`, "", "rate_limited", "slow down"},
		{"plain error is tool_error with its message", "behave", `{"do":"plain"}`, "", protocol.CodeToolError, "disk on fire"},
		{"bad code becomes tool_error", "behave", `{"do":"badcode"}`, "", protocol.CodeToolError, "weird"},
		{"panic is internal", "behave", `{"do":"panic"}`, "", protocol.CodeInternal, "crashed"},
		{"deadline is timeout", "behave", `{"do":"block"}`, "", protocol.CodeTimeout, ""},
		{"a tool ignoring its context still times out", "behave", `{"do":"ignore"}`, "", protocol.CodeTimeout, ""},
		{"still serving after all that", "behave", `{"do":"ok"}`, `{"did":"ok"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := e.Invoke(context.Background(), tt.tool, kernel.Call{Input: json.RawMessage(tt.input)})
			if tt.code == "" {
				if !out.IsOK() || string(out.Value) != tt.value {
					t.Fatalf("outcome = %+v %s, want value %s", out.Err, out.Value, tt.value)
				}
				return
			}
			if out.IsOK() || out.Err.Code != tt.code || !strings.Contains(out.Err.Message, tt.msg) {
				t.Fatalf("outcome = %+v %s, want code %s with %q", out.Err, out.Value, tt.code, tt.msg)
			}
		})
	}
	t.Run("cancel is cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan protocol.Outcome)
		go func() { done <- e.Invoke(ctx, "behave", kernel.Call{Input: json.RawMessage(`{"do":"ignore"}`)}) }()
		cancel()
		if out := <-done; out.IsOK() || out.Err.Code != protocol.CodeCancelled {
			t.Fatalf("outcome = %+v", out.Err)
		}
	})
}

// TestHandlesNotReachable walks everything reachable from a tool's run
// context — exported and unexported fields, through interfaces and pointers —
// and checks that no handle other than those the tool requires is there.
func TestHandlesNotReachable(t *testing.T) {
	e := newEnv(t, nil)
	var found []string
	probe := tool.New(tool.Spec{Name: "probe", Description: "Looks around."},
		func(ctx *tool.Context[fsHandles, tool.None], in struct{}) (string, error) {
			found = reachableHandles(reflect.ValueOf(ctx), map[uintptr]bool{}, 0)
			if _, ok := any(ctx.Handles.FS).(handle.Exec); ok {
				found = append(found, "exec via type assertion on FS")
			}
			if _, ok := ctx.Context.Value(struct{}{}).(handle.Exec); ok {
				found = append(found, "exec via context value")
			}
			return "", nil
		})
	s := session.New("s", nil)
	e2 := newEnvWithSession(t, s)
	for _, env := range []*kernel.Environment{e, e2} {
		if rec := env.Attach(context.Background(), kernel.Attachment{Tool: probe}); !rec.OK() {
			t.Fatal(rec.Failures)
		}
	}
	found = nil
	if out := e.Invoke(context.Background(), "probe", kernel.Call{Input: json.RawMessage(`{}`)}); !out.IsOK() {
		t.Fatal(out.Err)
	}
	if len(found) > 0 {
		t.Errorf("direct invoke: undeclared handles reachable: %v", found)
	}
	found = nil
	if out := s.Invoke(context.Background(), protocol.AudienceLLM, "probe", json.RawMessage(`{}`)); !out.IsOK() {
		t.Fatal(out.Err)
	}
	if len(found) > 0 {
		t.Errorf("through the session: undeclared handles reachable: %v", found)
	}
}

var execType = reflect.TypeFor[handle.Exec]()

func reachableHandles(v reflect.Value, seen map[uintptr]bool, depth int) []string {
	if !v.IsValid() || depth > 40 {
		return nil
	}
	var out []string
	if v.Type().Implements(execType) && v.Kind() != reflect.Interface {
		out = append(out, v.Type().String())
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return out
		}
		if v.Kind() == reflect.Pointer {
			if seen[v.Pointer()] {
				return out
			}
			seen[v.Pointer()] = true
		}
		out = append(out, reachableHandles(v.Elem(), seen, depth+1)...)
	case reflect.Struct:
		for i := range v.NumField() {
			out = append(out, reachableHandles(v.Field(i), seen, depth+1)...)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			out = append(out, reachableHandles(v.MapIndex(k), seen, depth+1)...)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			out = append(out, reachableHandles(v.Index(i), seen, depth+1)...)
		}
	}
	return out
}

func newEnvWithSession(t *testing.T, s *session.Session) *kernel.Environment {
	return newEnv(t, &kernel.Options{Session: s})
}

func TestAttachedToolIsACapability(t *testing.T) {
	s := session.New("s", nil)
	e := newEnvWithSession(t, s)
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: readTool}); !rec.OK() {
		t.Fatal(rec.Failures)
	}
	c, ok := s.Lookup("fs.read")
	if !ok || c.Side != protocol.SideAgent || c.Origin.Kind != protocol.OriginAgent || c.Description != "Read a file." {
		t.Fatalf("capability = %+v, %v", c, ok)
	}
	out := s.Invoke(context.Background(), protocol.AudienceLLM, "fs.read", json.RawMessage(`{"path":"hello.txt"}`))
	if !out.IsOK() || string(out.Value) != `{"text":"hello"}` {
		t.Fatalf("outcome = %+v %s", out.Err, out.Value)
	}
	out = s.Invoke(context.Background(), protocol.AudienceLLM, "fs.read", json.RawMessage(`{"path":"/etc/passwd"}`))
	if out.IsOK() || out.Err.Code != protocol.CodePathEscape {
		t.Fatalf("outcome = %+v", out.Err)
	}
	e.Detach("fs.read")
	if _, ok := s.Lookup("fs.read"); ok {
		t.Error("detach did not deregister the capability")
	}
}

// TestExposeToManySessions: one environment serves several sessions; tools
// attached later reach them, and Detach and Unexpose remove them.
func TestExposeToManySessions(t *testing.T) {
	e := newEnv(t, nil)
	s1, s2 := session.New("a", nil), session.New("b", nil)
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: readTool}); !rec.OK() {
		t.Fatal(rec.Failures)
	}
	must(t, e.Expose(s1))
	must(t, e.Expose(s2))
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: behaveTool}); !rec.OK() {
		t.Fatal(rec.Failures)
	}
	for _, s := range []*session.Session{s1, s2} {
		for _, n := range []string{"fs.read", "behave"} {
			if _, ok := s.Lookup(n); !ok {
				t.Errorf("session %s lacks %s", s.ID(), n)
			}
		}
	}
	out := s2.Invoke(context.Background(), protocol.AudienceLLM, "fs.read", json.RawMessage(`{"path":"hello.txt"}`))
	if !out.IsOK() {
		t.Fatal(out.Err)
	}
	e.Detach("behave")
	e.Unexpose(s1)
	if _, ok := s2.Lookup("behave"); ok {
		t.Error("detach left behave in session b")
	}
	if _, ok := s1.Lookup("fs.read"); ok {
		t.Error("unexpose left fs.read in session a")
	}
	if _, ok := s2.Lookup("fs.read"); !ok {
		t.Error("unexposing a removed fs.read from session b")
	}
}
