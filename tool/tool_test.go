package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

type searchIn struct {
	Pattern string `json:"pattern" jsonschema:"a regular expression"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many matches"`
}
type searchOut struct {
	Matches []string `json:"matches"`
}
type netFS struct {
	Net handle.Net
	FS  handle.FS
}
type creds struct {
	Token    string `json:"token" jsonschema:"the API token"`
	Endpoint string `json:"endpoint"`
	internal string //nolint:unused // proves unexported fields are not bindings
}

func TestManifestDerived(t *testing.T) {
	tl := tool.New(tool.Spec{Name: "web.search", Description: "Search."},
		func(ctx *tool.Context[netFS, creds], in searchIn) (searchOut, error) { return searchOut{}, nil })
	m := tl.Manifest()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(m.Requires) != "[fs net]" {
		t.Errorf("requires = %v, want [fs net] (sorted)", m.Requires)
	}
	if fmt.Sprint(m.BindingNames) != "[token endpoint]" {
		t.Errorf("binding_names = %v", m.BindingNames)
	}
	if !strings.Contains(string(m.BindingSchemas["token"]), `"description":"the API token"`) {
		t.Errorf("token schema = %s", m.BindingSchemas["token"])
	}
	for _, want := range []string{`"pattern"`, `"description":"a regular expression"`, `"required":["pattern"]`} {
		if !strings.Contains(string(m.InputSchema), want) {
			t.Errorf("input schema %s lacks %s", m.InputSchema, want)
		}
	}
	if !strings.Contains(string(m.OutputSchema), `"matches"`) {
		t.Errorf("output schema = %s", m.OutputSchema)
	}
	if m.Format != tool.Format || m.Hosting != tool.HostingProvisioned || m.Payload != "" {
		t.Errorf("manifest = %+v", m)
	}
	_ = creds{}.internal
	b, _ := json.Marshal(m)
	if strings.Contains(string(b), "internal") {
		t.Errorf("an unexported field became a binding: %s", b)
	}
}

func TestExplicitSchemas(t *testing.T) {
	tl := tool.New(tool.Spec{Name: "x", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"string"}`)},
		func(ctx *tool.Context[tool.None, tool.None], in map[string]any) (string, error) { return "", nil })
	m := tl.Manifest()
	if string(m.InputSchema) != `{"type":"object"}` || string(m.OutputSchema) != `{"type":"string"}` {
		t.Errorf("schemas = %s %s", m.InputSchema, m.OutputSchema)
	}
}

func TestDeclarationMistakesPanic(t *testing.T) {
	type notHandles struct{ Name string }
	type twice struct {
		A handle.FS
		B handle.FS
	}
	tests := []struct {
		name string
		fn   func()
		want string
	}{
		{"handles field not a handle", func() {
			tool.New(tool.Spec{Name: "a", Description: "d"}, func(*tool.Context[notHandles, tool.None], struct{}) (string, error) { return "", nil })
		}, "not a handle interface"},
		{"handle twice", func() {
			tool.New(tool.Spec{Name: "a", Description: "d"}, func(*tool.Context[twice, tool.None], struct{}) (string, error) { return "", nil })
		}, "declared twice"},
		{"handles not a struct", func() {
			tool.New(tool.Spec{Name: "a", Description: "d"}, func(*tool.Context[handle.FS, tool.None], struct{}) (string, error) { return "", nil })
		}, "is not a struct"},
		{"no name", func() {
			tool.New(tool.Spec{}, func(*tool.Context[tool.None, tool.None], struct{}) (string, error) { return "", nil })
		}, "needs a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(fmt.Sprint(p), tt.want) {
					t.Errorf("panic = %v, want one containing %q", p, tt.want)
				}
			}()
			tt.fn()
		})
	}
}

func TestManifestValidate(t *testing.T) {
	good := func() tool.Manifest {
		return tool.Manifest{Format: tool.Format, Name: "a", InputSchema: json.RawMessage(`{}`), Requires: []handle.Kind{"fs"}, Hosting: "provisioned"}
	}
	tests := []struct {
		name string
		mut  func(*tool.Manifest)
		want string
	}{
		{"format", func(m *tool.Manifest) { m.Format = "tool/v9" }, "format"},
		{"name", func(m *tool.Manifest) { m.Name = "" }, "name is empty"},
		// The name becomes a capability's at attach: the protocol's rule
		// applies, so a loader refuses it before anything runs.
		{"name with space", func(m *tool.Manifest) { m.Name = "x y" }, `manifest name "x y" is not a capability name: must not contain spaces`},
		{"name with newline", func(m *tool.Manifest) { m.Name = "fs.read\n" }, "must not contain spaces or control characters"},
		{"name too long", func(m *tool.Manifest) { m.Name = strings.Repeat("x", 300) }, "300 bytes, more than 256"},
		{"input schema", func(m *tool.Manifest) { m.InputSchema = json.RawMessage(`[]`) }, "input_schema"},
		{"unknown handle", func(m *tool.Manifest) { m.Requires = []handle.Kind{"gpu"} }, `unknown handle "gpu"`},
		{"handle twice", func(m *tool.Manifest) { m.Requires = []handle.Kind{"fs", "fs"} }, "twice"},
		{"binding without schema", func(m *tool.Manifest) { m.BindingNames = []string{"k"} }, `binding "k" has no schema`},
		{"hosting", func(m *tool.Manifest) { m.Hosting = "inline" }, "hosting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good()
			tt.mut(&m)
			if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestProvisionAndInvoke(t *testing.T) {
	var got creds
	tl := tool.New(tool.Spec{Name: "b", Description: "d"},
		func(ctx *tool.Context[tool.None, creds], in searchIn) (searchOut, error) {
			got = ctx.Bindings
			ctx.Progress(1, 2, "half")
			return searchOut{Matches: []string{in.Pattern, ctx.CallID}}, nil
		})
	inst, err := tl.Provision(context.Background(), tool.Handles{}, map[string]json.RawMessage{"token": json.RawMessage(`"t0k"`), "endpoint": json.RawMessage(`"https://x"`)})
	if err != nil {
		t.Fatal(err)
	}
	var prog []tool.Progress
	out, err := inst.Invoke(context.Background(), &tool.Call{ID: "c1", Input: json.RawMessage(`{"pattern":"p"}`), Progress: func(p tool.Progress) { prog = append(prog, p) }})
	if err != nil || string(out) != `{"matches":["p","c1"]}` {
		t.Fatalf("Invoke = %s, %v", out, err)
	}
	if got.Token != "t0k" || got.Endpoint != "https://x" || len(prog) != 1 || prog[0].Message != "half" {
		t.Errorf("bindings %+v, progress %+v", got, prog)
	}
}

// TestInputKeyInAnotherCase: a Go tool's input decodes with encoding/json,
// which matches keys to fields without regard to case and takes the last:
// {"pattern":"ok","PATTERN":"other"} would pass a schema checking
// "pattern" and run with "other". It is invalid_input, naming both.
func TestInputKeyInAnotherCase(t *testing.T) {
	ran := false
	tl := tool.New(tool.Spec{Name: "s", Description: "d"},
		func(ctx *tool.Context[tool.None, tool.None], in searchIn) (searchOut, error) {
			ran = true
			return searchOut{}, nil
		})
	inst, err := tl.Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = inst.Invoke(context.Background(), &tool.Call{ID: "c1", Input: json.RawMessage(`{"pattern":"ok","PATTERN":"other"}`)})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidInput || !strings.Contains(pe.Message, `"PATTERN" and "pattern"`) || ran {
		t.Fatalf("Invoke = %v (ran %v), want invalid_input naming both keys", err, ran)
	}

	// Free-form data keeps its keys as sent: a script's arguments, a
	// request's headers ("Name" and "name" are two there; the re-probe found
	// js.eval refusing them). Fields of a nested struct are one field still.
	type inner struct {
		Mode string `json:"mode"`
	}
	type freeIn struct {
		Args    map[string]any    `json:"args"`
		Raw     json.RawMessage   `json:"raw"`
		Any     any               `json:"any"`
		Headers map[string]string `json:"headers"`
		Opts    []inner           `json:"opts"`
	}
	free := tool.New(tool.Spec{Name: "f", Description: "d"}, func(ctx *tool.Context[tool.None, tool.None], in freeIn) (string, error) { return "ran", nil })
	finst, err := free.Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := finst.Invoke(context.Background(), &tool.Call{ID: "c2", Input: json.RawMessage(`{"args":{"Name":"Ada","name":"ada"},"raw":{"A":1,"a":2},"any":{"X":1,"x":2},"headers":{"Content-Type":"a","content-type":"b"},"opts":[{"mode":"read"}]}`)})
	if err != nil || string(out) != `"ran"` {
		t.Fatalf("free-form keys in another case: %s %v, want it run", out, err)
	}
	_, err = finst.Invoke(context.Background(), &tool.Call{ID: "c3", Input: json.RawMessage(`{"opts":[{"mode":"read"},{"mode":"read","MODE":"write"}]}`)})
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidInput {
		t.Fatalf("a nested struct's field twice: %v, want invalid_input", err)
	}
}
