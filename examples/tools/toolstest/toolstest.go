// Package toolstest tests tools twice over: natively, as the Go tool made
// with tool.New, and hosted, as the WebAssembly artifact brain build makes
// of the same package. Every case of a table runs in both, and the two
// outcomes must be identical — the same value, or the same error code and
// message — so that a tool behaves the same however an environment runs it.
//
// It is for tests only. A test binary builds its artifacts once, in
// TestMain, and shares one [Harness] (one host, one compilation cache):
//
//	var harness *toolstest.Harness
//
//	func TestMain(m *testing.M) {
//		proc.RunHelperIfRequested() // first: exec children re-run this binary
//		h, err := toolstest.Build(ctx, toolstest.Options{Dir: "../..", Patterns: []string{"./examples/tools/..."}})
//		…
//		harness = h
//		code := m.Run()
//		h.Close()
//		os.Exit(code)
//	}
//
//	func TestRead(t *testing.T) {
//		envs := harness.NewEnvs(t, []kernel.Provider{fsProvider(t)}, nil)
//		envs.MustAttach(t, kernel.Attachment{Tool: fsread.Tool})
//		envs.Run(t, []toolstest.Case{
//			{Name: "escape", Tool: "fs.read", Input: `{"path":"../x"}`, WantCode: protocol.CodePathEscape},
//		})
//	}
//
// Why both: the hosted artifact reaches its handles through host functions
// and JSON, and its output is checked against the output schema; the
// native tool does neither. A difference between the two is a bug in the
// tool (it depends on something only one side has) or in the runtime.
package toolstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Options configure [Build].
type Options struct {
	// Dir is where the go command runs: inside the module that holds the
	// tool packages. Default: the current directory.
	Dir string
	// Patterns are the go list patterns of the tool packages, relative to
	// Dir. Packages without an exported Tool are skipped.
	Patterns []string
	// Out receives the artifacts. Default: a temporary directory that
	// Close removes.
	Out string
	// Host configures the one host of the harness. Its CacheDir, when
	// empty, is <Out>/cache: one compilation cache for every environment
	// the harness makes, so that each payload compiles once.
	Host *host.Options
}

// Harness holds what a test binary makes once: the built artifacts and the
// host that runs them. It is safe for concurrent use.
type Harness struct {
	out    string
	ownOut bool
	host   *host.Host
	built  []build.Artifact

	mu     sync.Mutex
	loaded map[string]*host.Artifact
}

// Build builds the artifacts of the tool packages opts.Patterns matches and
// starts the host. Call it once per test binary, in TestMain, and Close the
// harness when the tests are done.
func Build(ctx context.Context, opts Options) (*Harness, error) {
	h := &Harness{out: opts.Out, loaded: map[string]*host.Artifact{}}
	if h.out == "" {
		dir, err := os.MkdirTemp("", "brain-toolstest-")
		if err != nil {
			return nil, err
		}
		h.out, h.ownOut = dir, true
	}
	var err error
	h.built, err = build.Build(ctx, opts.Patterns, build.Options{Dir: opts.Dir, Out: h.out})
	if err != nil {
		h.removeOut()
		return nil, err
	}
	var ho host.Options
	if opts.Host != nil {
		ho = *opts.Host
	}
	if ho.CacheDir == "" {
		ho.CacheDir = filepath.Join(h.out, "cache")
	}
	if err := h.precompile(ho.CacheDir); err != nil {
		h.removeOut()
		return nil, err
	}
	if h.host, err = host.New(ctx, &ho); err != nil {
		h.removeOut()
		return nil, err
	}
	return h, nil
}

// precompile compiles every payload into the host's cache in a process
// without the race detector when this one has it (testutil.WarmCache says
// why); the tests' attaches then load compiled code from the cache.
func (h *Harness) precompile(cacheDir string) error {
	var manifests []string
	for _, b := range h.built {
		manifests = append(manifests, b.ManifestPath)
	}
	if err := testutil.WarmCache(cacheDir, manifests...); err != nil {
		return fmt.Errorf("precompile: %w", err)
	}
	return nil
}

func (h *Harness) removeOut() {
	if h.ownOut {
		_ = os.RemoveAll(h.out)
	}
}

// Close stops the host and removes the artifacts the harness made.
func (h *Harness) Close() error {
	err := h.host.Close(context.Background())
	h.removeOut()
	return err
}

// Built returns what Build built, one entry per tool package.
func (h *Harness) Built() []build.Artifact { return slices.Clone(h.built) }

// Artifact returns the hosted artifact of the tool named name, loaded from
// its manifest (and its payload verified) on first use.
func (h *Harness) Artifact(name string) (*host.Artifact, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.loaded[name]; ok {
		return a, nil
	}
	for _, b := range h.built {
		if b.Manifest.Name == name {
			a, err := h.host.LoadManifest(b.ManifestPath)
			if err != nil {
				return nil, err
			}
			h.loaded[name] = a
			return a, nil
		}
	}
	return nil, fmt.Errorf("no artifact of a tool named %q was built", name)
}

// Mode is one way of running a tool.
type Mode string

// The two modes every case runs in.
const (
	Native Mode = "native" // the Go tool, attached as it is
	Hosted Mode = "hosted" // its WebAssembly artifact, run by the harness's host
)

// Modes lists the modes in the order cases run in them.
func Modes() []Mode { return []Mode{Native, Hosted} }

// Envs are two environments with the same providers: one attaches tools
// natively, the other their artifacts.
type Envs struct {
	h    *Harness
	envs map[Mode]*kernel.Environment
}

// NewEnvs sets up two environments, each opening every one of providers
// (so Open runs twice: once per environment), and closes them when the test
// ends. A provider that fails to open fails the test.
func (h *Harness) NewEnvs(t testing.TB, providers []kernel.Provider, opts *kernel.Options) *Envs {
	t.Helper()
	e := &Envs{h: h, envs: map[Mode]*kernel.Environment{}}
	for _, m := range Modes() {
		var o kernel.Options
		if opts != nil {
			o = *opts
		}
		o.ID = string(m)
		env := kernel.New(&o)
		for _, p := range providers {
			if err := env.Provide(p); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
		t.Cleanup(func() { _ = env.Close() })
		if rec := env.Setup(context.Background()); len(rec.Failures) > 0 {
			t.Fatalf("%s environment setup failed: %+v", m, rec.Failures)
		}
		e.envs[m] = env
	}
	return e
}

// Env returns the environment of mode m.
func (e *Envs) Env(m Mode) *kernel.Environment { return e.envs[m] }

// Attach attaches each tool natively and its artifact hosted, with the same
// bindings, and returns both receipts. It fails the test when an artifact
// is missing or its manifest differs from the Go tool's, or when the two
// receipts disagree: the same tools must attach, and the same must fail
// with the same codes.
func (e *Envs) Attach(t testing.TB, atts ...kernel.Attachment) map[Mode]kernel.AttachReceipt {
	t.Helper()
	hosted := make([]kernel.Attachment, len(atts))
	for i, a := range atts {
		m := a.Tool.Manifest()
		art, err := e.h.Artifact(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := ManifestDiff(m, art.Manifest()); diff != "" {
			t.Fatalf("the artifact's manifest of %q differs from the Go tool's: %s", m.Name, diff)
		}
		hosted[i] = kernel.Attachment{Tool: art, Bindings: a.Bindings}
	}
	recs := map[Mode]kernel.AttachReceipt{
		Native: e.envs[Native].Attach(context.Background(), atts...),
		Hosted: e.envs[Hosted].Attach(context.Background(), hosted...),
	}
	n, h := recs[Native], recs[Hosted]
	if !slices.Equal(n.Attached, h.Attached) || !sameFailures(n.Failures, h.Failures) {
		t.Fatalf("attach receipts differ:\nnative: attached %v, failures %+v\nhosted: attached %v, failures %+v",
			n.Attached, n.Failures, h.Attached, h.Failures)
	}
	return recs
}

// MustAttach is Attach, failing the test unless every tool attached.
func (e *Envs) MustAttach(t testing.TB, atts ...kernel.Attachment) {
	t.Helper()
	recs := e.Attach(t, atts...)
	if rec := recs[Native]; !rec.OK() {
		t.Fatalf("attach failed: %+v", rec.Failures)
	}
}

func sameFailures(a, b []kernel.Failure) bool {
	return slices.EqualFunc(a, b, func(x, y kernel.Failure) bool { return x.Name == y.Name && x.Code == y.Code })
}

// ManifestDiff describes how the manifest of an artifact differs from the
// Go tool's it was built from, payload identity aside; "" when they agree.
// Schemas are compared as JSON values.
func ManifestDiff(native, hosted tool.Manifest) string {
	hosted.Payload = ""
	var diffs []string
	field := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			diffs = append(diffs, fmt.Sprintf("%s: %v != %v", name, a, b))
		}
	}
	schema := func(name string, a, b json.RawMessage) {
		if !JSONEqual(a, b) {
			diffs = append(diffs, fmt.Sprintf("%s: %s != %s", name, a, b))
		}
	}
	field("format", native.Format, hosted.Format)
	field("name", native.Name, hosted.Name)
	field("description", native.Description, hosted.Description)
	field("requires", native.Requires, hosted.Requires)
	field("binding_names", native.BindingNames, hosted.BindingNames)
	field("hosting", native.Hosting, hosted.Hosting)
	field("payload", native.Payload, hosted.Payload)
	schema("input_schema", native.InputSchema, hosted.InputSchema)
	schema("output_schema", native.OutputSchema, hosted.OutputSchema)
	if len(native.BindingSchemas) != len(hosted.BindingSchemas) {
		diffs = append(diffs, fmt.Sprintf("binding_schemas: %d != %d", len(native.BindingSchemas), len(hosted.BindingSchemas)))
	}
	for k, v := range native.BindingSchemas {
		schema("binding_schemas."+k, v, hosted.BindingSchemas[k])
	}
	return strings.Join(diffs, "; ")
}

// Case is one call of a tool and what its outcome must be, in both modes.
type Case struct {
	// Name names the subtest.
	Name string
	// Tool is the name of the attached tool to call.
	Tool string
	// Input is the call's input: JSON text (a string, []byte or
	// json.RawMessage) or any other value, encoded as JSON. nil is {}.
	Input any
	// Timeout, when positive, is the call's deadline.
	Timeout time.Duration
	// WantCode is the error code the call must fail with; "" means it must
	// succeed.
	WantCode protocol.Code
	// WantMessage lists text the error message must contain.
	WantMessage []string
	// Want, when not nil, is the value the call must return, compared as
	// JSON: JSON text (a string, []byte or json.RawMessage) or any other
	// value, encoded as JSON.
	Want any
	// Check, when set, checks the outcome further; it runs once per mode.
	Check func(t testing.TB, out protocol.Outcome)
	// NoTwin, when set, says why the case is not run against the tool's
	// twin in another language ([Twins]): what the languages cannot
	// share, such as an error message of Go's own regular expression
	// parser.
	NoTwin string
}

// result is what one call did.
type result struct {
	out      protocol.Outcome
	progress []tool.Progress
}

// Run runs every case in both modes, each in a subtest named after the
// case and the mode, checks each outcome against the case, and fails the
// case's test unless the two outcomes (and progress reports) are identical.
func (e *Envs) Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			input, err := toJSON(c.Input)
			if err != nil {
				t.Fatalf("input: %v", err)
			}
			results := map[Mode]result{}
			for _, m := range Modes() {
				t.Run(string(m), func(t *testing.T) {
					r := e.call(m, c, input)
					results[m] = r
					checkCase(t, c, r.out)
				})
			}
			if diff := OutcomeDiff(results[Native].out, results[Hosted].out); diff != "" {
				t.Errorf("native and hosted outcomes differ: %s", diff)
			}
			if n, h := results[Native].progress, results[Hosted].progress; !reflect.DeepEqual(n, h) {
				t.Errorf("native and hosted progress differ:\nnative: %+v\nhosted: %+v", n, h)
			}
		})
	}
}

// call invokes c's tool in mode m.
func (e *Envs) call(m Mode, c Case, input json.RawMessage) result {
	ctx := context.Background()
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var mu sync.Mutex
	var r result
	r.out = e.envs[m].Invoke(ctx, c.Tool, kernel.Call{Input: input, Progress: func(p tool.Progress) {
		mu.Lock()
		defer mu.Unlock()
		r.progress = append(r.progress, p)
	}})
	mu.Lock()
	defer mu.Unlock()
	return r
}

// checkCase fails t unless out is what c wants.
func checkCase(t testing.TB, c Case, out protocol.Outcome) {
	t.Helper()
	switch {
	case c.WantCode != "" && out.IsOK():
		t.Errorf("got value %s, want error code %s", out.Value, c.WantCode)
	case c.WantCode != "" && out.Err.Code != c.WantCode:
		t.Errorf("got error %s: %s; want code %s", out.Err.Code, out.Err.Message, c.WantCode)
	case c.WantCode == "" && !out.IsOK():
		t.Errorf("got error %s: %s; want a value", out.Err.Code, out.Err.Message)
	}
	if !out.IsOK() {
		for _, part := range c.WantMessage {
			if !strings.Contains(out.Err.Message, part) {
				t.Errorf("message %q does not contain %q", out.Err.Message, part)
			}
		}
	}
	if c.Want != nil && out.IsOK() {
		want, err := toJSON(c.Want)
		if err != nil {
			t.Fatalf("want: %v", err)
		}
		if !JSONEqual(out.Value, want) {
			t.Errorf("value = %s\nwant    %s", out.Value, want)
		}
	}
	if c.Check != nil {
		c.Check(t, out)
	}
}

// OutcomeDiff describes how two outcomes differ — error code, error message
// or value (compared as JSON) — or returns "" when they are identical.
func OutcomeDiff(a, b protocol.Outcome) string {
	switch {
	case a.IsOK() != b.IsOK():
		return fmt.Sprintf("%s != %s", describe(a), describe(b))
	case !a.IsOK() && (a.Err.Code != b.Err.Code || a.Err.Message != b.Err.Message):
		return fmt.Sprintf("%s != %s", describe(a), describe(b))
	case a.IsOK() && !JSONEqual(a.Value, b.Value):
		return fmt.Sprintf("%s != %s", describe(a), describe(b))
	}
	return ""
}

func describe(o protocol.Outcome) string {
	if o.IsOK() {
		return "value " + string(o.Value)
	}
	return fmt.Sprintf("error %s: %q", o.Err.Code, o.Err.Message)
}

// JSONEqual reports whether a and b are the same JSON value. Numbers are
// compared as written ("1" and "1.0" differ); object key order and
// whitespace do not matter. Two empty inputs are equal.
func JSONEqual(a, b []byte) bool {
	if len(bytes.TrimSpace(a)) == 0 || len(bytes.TrimSpace(b)) == 0 {
		return len(bytes.TrimSpace(a)) == len(bytes.TrimSpace(b))
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	if errA != nil || errB != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// toJSON returns v as JSON text: v itself when it is text, else its
// encoding. nil is nil.
func toJSON(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return json.RawMessage(v), nil
	case []byte:
		return json.RawMessage(v), nil
	case json.RawMessage:
		return v, nil
	}
	return json.Marshal(v)
}
