package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/jsonkeys"
	"github.com/brainrt/brain/protocol"
)

// None is the handles or bindings type of a tool that needs none.
type None struct{}

// Spec names and describes a tool. InputSchema and OutputSchema, when set,
// replace the schemas derived from the Go types.
type Spec struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
}

// Context is what a tool's function is given: the call's context.Context
// (deadline and cancellation), its id, exactly the handles declared by H,
// the binding values declared by B, the workspace and a progress reporter.
// Nothing else of the environment is reachable from it.
type Context[H, B any] struct {
	context.Context
	// CallID identifies the call.
	CallID string
	// Handles holds the declared handles, and only them.
	Handles H
	// Bindings holds the binding values supplied at attach.
	Bindings B
	// Workspace names the environment's workspace, for messages; tools
	// reach files only through the fs handle.
	Workspace string

	progress func(Progress)
}

// Progress is one progress report of a running call.
type Progress struct {
	Done    float64 `json:"done"`
	Total   float64 `json:"total,omitempty"`
	Message string  `json:"message,omitempty"`
}

// Progress reports how far the call has come; total may be 0 when unknown.
func (c *Context[H, B]) Progress(done, total float64, message string) {
	if c.progress != nil {
		c.progress(Progress{Done: done, Total: total, Message: message})
	}
}

// Handles carries the handles an environment provides to one call. The
// environment sets exactly the fields named by the tool's requires; the
// others are nil.
type Handles struct {
	Exec handle.Exec
	FS   handle.FS
	Net  handle.Net
	JS   handle.JS
	Page handle.Page
}

// Get returns the handle of kind k, or nil.
func (h *Handles) Get(k handle.Kind) any {
	switch k {
	case handle.KindExec:
		return h.Exec
	case handle.KindFS:
		return h.FS
	case handle.KindNet:
		return h.Net
	case handle.KindJS:
		return h.JS
	case handle.KindPage:
		return h.Page
	}
	return nil
}

// Set stores v, which must implement the interface of kind k.
func (h *Handles) Set(k handle.Kind, v any) error {
	ok := false
	switch k {
	case handle.KindExec:
		h.Exec, ok = v.(handle.Exec)
	case handle.KindFS:
		h.FS, ok = v.(handle.FS)
	case handle.KindNet:
		h.Net, ok = v.(handle.Net)
	case handle.KindJS:
		h.JS, ok = v.(handle.JS)
	case handle.KindPage:
		h.Page, ok = v.(handle.Page)
	}
	if !ok {
		return fmt.Errorf("%T does not implement the %s handle", v, k)
	}
	return nil
}

// Call is one invocation as an environment hands it to an [Instance].
type Call struct {
	ID string
	// Session names whose state the call may see: the id of the session
	// the call was made in, or empty for a call made outside any session
	// (brain run, Environment.Invoke without one) and for every call of a
	// tool whose policy shares its instances across sessions
	// (kernel.Policy.ShareInstances). An instance that keeps state
	// between calls keeps it per Session (docs/security.md, "Artifact
	// state").
	Session   string
	Input     json.RawMessage // already validated against the input schema
	Handles   Handles
	Workspace string
	Progress  func(Progress) // may be nil
}

// SessionEnder is implemented by an [Instance] that keeps state per
// session: the environment calls EndSession when session id leaves it
// (deleted, hibernated or detached), so that the instance frees what it
// kept for that session. A later call of the same session starts afresh.
type SessionEnder interface {
	Instance
	EndSession(id string)
}

// Attachable is anything an environment can attach: a native Go tool made
// with [New], or a WebAssembly artifact. Both are provisioned and invoked the
// same way.
type Attachable interface {
	Manifest() Manifest
	// Provision prepares the tool once, at attach: bindings hold one
	// validated value per binding name; handles hold exactly the handles
	// the tool requires (for initialisation). An error fails the attach.
	Provision(ctx context.Context, handles Handles, bindings map[string]json.RawMessage) (Instance, error)
}

// Instance is a provisioned tool.
type Instance interface {
	Invoke(ctx context.Context, call *Call) (json.RawMessage, error)
	Close() error
}

// DeadlineBound is implemented by an Instance whose Invoke returns by its
// context's deadline or cancellation whatever its tool does, such as an
// artifact's (the host stops its guest there). A caller that must return
// at the deadline may run such an instance on its own goroutine instead of
// one it can leave behind.
type DeadlineBound interface {
	Instance
	// ReturnsByDeadline marks the guarantee; it does nothing.
	ReturnsByDeadline()
}

// Tool is a native Go tool, made with [New]. It implements [Attachable].
type Tool[In, Out, H, B any] struct {
	manifest Manifest
	fn       func(*Context[H, B], In) (Out, error)
	init     func(ctx context.Context, handles H, bindings B) error
	handles  []handleField
}

type handleField struct {
	index int
	kind  handle.Kind
}

var handleTypes = map[reflect.Type]handle.Kind{
	reflect.TypeFor[handle.Exec](): handle.KindExec,
	reflect.TypeFor[handle.FS]():   handle.KindFS,
	reflect.TypeFor[handle.Net]():  handle.KindNet,
	reflect.TypeFor[handle.JS]():   handle.KindJS,
	reflect.TypeFor[handle.Page](): handle.KindPage,
}

// New declares a tool. H is a struct whose fields are handle interfaces
// (handle.FS, handle.Exec, …): they are its `requires`. B is a struct whose
// exported fields are its bindings, named by their json tags: they are its
// `binding_names`, each with a schema derived from the field's type. Use
// [None] for either when there are none.
//
// New panics on a declaration mistake — H or B not a struct, a field of H
// that is not a handle interface, a handle declared twice, a schema that
// cannot be derived — since those are programming errors found at start-up.
func New[In, Out, H, B any](spec Spec, fn func(ctx *Context[H, B], in In) (Out, error)) *Tool[In, Out, H, B] {
	t := &Tool[In, Out, H, B]{fn: fn}
	t.manifest = Manifest{Format: Format, Name: spec.Name, Description: spec.Description,
		Hosting: HostingProvisioned, Requires: []handle.Kind{}, BindingNames: []string{}}
	if spec.Name == "" || fn == nil {
		panic("tool.New: a tool needs a name and a function")
	}
	t.handles, t.manifest.Requires = handleFieldsOf(reflect.TypeFor[H](), spec.Name)
	t.manifest.BindingNames, t.manifest.BindingSchemas = bindingsOf(reflect.TypeFor[B](), spec.Name)
	t.manifest.InputSchema = spec.InputSchema
	if t.manifest.InputSchema == nil {
		t.manifest.InputSchema = mustSchema[In](spec.Name, "input")
	}
	t.manifest.OutputSchema = spec.OutputSchema
	if t.manifest.OutputSchema == nil {
		t.manifest.OutputSchema = mustSchema[Out](spec.Name, "output")
	}
	return t
}

// WithInit returns a copy of the tool that runs init once at attach, with
// its handles and bindings. An error or a panic fails the attach.
func (t *Tool[In, Out, H, B]) WithInit(init func(ctx context.Context, handles H, bindings B) error) *Tool[In, Out, H, B] {
	c := *t
	c.init = init
	return &c
}

// Manifest returns the tool's tool/v1 manifest.
func (t *Tool[In, Out, H, B]) Manifest() Manifest {
	m := t.manifest
	m.Requires = slices.Clone(m.Requires)
	m.BindingNames = slices.Clone(m.BindingNames)
	return m
}

func handleFieldsOf(h reflect.Type, name string) ([]handleField, []handle.Kind) {
	if h.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tool %q: the handles type %s is not a struct", name, h))
	}
	var fields []handleField
	kinds := []handle.Kind{}
	for i := range h.NumField() {
		f := h.Field(i)
		k, ok := handleTypes[f.Type]
		if !ok {
			panic(fmt.Sprintf("tool %q: handles field %s has type %s, which is not a handle interface (handle.Exec, handle.FS, handle.Net, handle.JS, handle.Page)", name, f.Name, f.Type))
		}
		if !f.IsExported() {
			panic(fmt.Sprintf("tool %q: handles field %s must be exported", name, f.Name))
		}
		if slices.Contains(kinds, k) {
			panic(fmt.Sprintf("tool %q: handle %s is declared twice", name, k))
		}
		fields = append(fields, handleField{index: i, kind: k})
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return fields, kinds
}

func bindingsOf(b reflect.Type, name string) ([]string, map[string]json.RawMessage) {
	if b.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tool %q: the bindings type %s is not a struct", name, b))
	}
	names := []string{}
	schemas := map[string]json.RawMessage{}
	for i := range b.NumField() {
		f := b.Field(i)
		if !f.IsExported() {
			continue
		}
		n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if n == "-" {
			continue
		}
		if n == "" {
			n = f.Name
		}
		raw, err := schemaForType(f.Type, f.Tag.Get("jsonschema"))
		if err != nil {
			panic(fmt.Sprintf("tool %q: binding %s: %v", name, n, err))
		}
		names = append(names, n)
		schemas[n] = raw
	}
	if len(schemas) == 0 {
		schemas = nil
	}
	return names, schemas
}

func mustSchema[T any](name, which string) json.RawMessage {
	raw, err := schemaForType(reflect.TypeFor[T](), "")
	if err != nil {
		panic(fmt.Sprintf("tool %q: %s schema: %v", name, which, err))
	}
	return raw
}

// Provision decodes the binding values into B, checks the handles, and runs
// the tool's init, if any. A panic in init is returned as an error.
func (t *Tool[In, Out, H, B]) Provision(ctx context.Context, hs Handles, bindings map[string]json.RawMessage) (inst Instance, err error) {
	raw, err := json.Marshal(bindings)
	if err != nil {
		return nil, fmt.Errorf("bindings: %w", err)
	}
	var b B
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("bindings: %w", err)
	}
	in := &instance[In, Out, H, B]{t: t, bindings: b}
	h, err := in.handlesFor(&hs)
	if err != nil {
		return nil, err
	}
	if t.init != nil {
		defer func() {
			if p := recover(); p != nil {
				inst, err = nil, protocol.Errorf(protocol.CodeInternal, "init panicked: %v", p)
			}
		}()
		if err := t.init(ctx, h, b); err != nil {
			return nil, fmt.Errorf("init: %w", err)
		}
	}
	return in, nil
}

type instance[In, Out, H, B any] struct {
	t        *Tool[In, Out, H, B]
	bindings B
}

// handlesFor copies the declared handles, and only them, into a new H.
func (in *instance[In, Out, H, B]) handlesFor(hs *Handles) (H, error) {
	var h H
	if len(in.t.handles) == 0 {
		return h, nil
	}
	v := reflect.ValueOf(&h).Elem()
	for _, f := range in.t.handles {
		x := hs.Get(f.kind)
		if x == nil {
			return h, fmt.Errorf("handle %s is required but was not provided", f.kind)
		}
		v.Field(f.index).Set(reflect.ValueOf(x))
	}
	return h, nil
}

// Invoke decodes the input, runs the tool's function with exactly its
// declared handles, and encodes the output.
func (in *instance[In, Out, H, B]) Invoke(ctx context.Context, call *Call) (json.RawMessage, error) {
	// Keys equal but for case, where they name one field (casekeys.go).
	if _, _, maybe := jsonkeys.Duplicate(call.Input, true); maybe { // most inputs have no such pair anywhere: 0 allocations to tell
		if k1, k2, dup := caseTwin(call.Input, reflect.TypeFor[In]()); dup {
			return nil, protocol.Errorf(protocol.CodeInvalidInput, "input holds %q and %q in one object: to this Go tool they are one field (matched without regard to case); send it once", k1, k2)
		}
	}
	var input In
	if err := json.Unmarshal(call.Input, &input); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidInput, "input does not decode: %v", err)
	}
	h, err := in.handlesFor(&call.Handles)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	c := &Context[H, B]{Context: ctx, CallID: call.ID, Handles: h, Bindings: in.bindings,
		Workspace: call.Workspace, progress: call.Progress}
	out, err := in.t.fn(c, input)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Close releases nothing: a native tool holds no resources of its own.
func (in *instance[In, Out, H, B]) Close() error { return nil }

// Errorf returns an error with an identifier-shaped code that reaches the
// caller's Outcome unchanged, such as tool.Errorf("rate_limited", "retry in
// %ds", 30). A code that is not identifier-shaped becomes tool_error.
func Errorf(code, format string, args ...any) error {
	return protocol.Errorf(protocol.Code(code), format, args...)
}
