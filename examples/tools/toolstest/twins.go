package toolstest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Twin is the mode of a tool's twin written in another language: the
// TypeScript tools of examples/ts-tools, built by brain build into
// JavaScript artifacts and run by package host/jshost.
const Twin Mode = "twin"

// Twins are two environments with the same providers: one attaches the Go
// tools natively, the other their twins in another language, found by
// name. Every case runs in both and must end in identical outcomes, as
// [Envs] does for a tool and its WebAssembly artifact. A case with NoTwin
// set runs natively only.
type Twins struct {
	native, twin *kernel.Environment
	load         func(name string) (tool.Attachable, error)
}

// NewTwins sets up the two environments (each opening every one of
// providers) and closes them when the test ends; load returns the twin of
// the Go tool named name.
func NewTwins(t testing.TB, providers []kernel.Provider, opts *kernel.Options, load func(name string) (tool.Attachable, error)) *Twins {
	t.Helper()
	w := &Twins{load: load}
	for i, env := range []**kernel.Environment{&w.native, &w.twin} {
		var o kernel.Options
		if opts != nil {
			o = *opts
		}
		o.ID = string([]Mode{Native, Twin}[i])
		e := kernel.New(&o)
		for _, p := range providers {
			if err := e.Provide(p); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { _ = e.Close() })
		if rec := e.Setup(context.Background()); len(rec.Failures) > 0 {
			t.Fatalf("%s environment setup failed: %+v", o.ID, rec.Failures)
		}
		*env = e
	}
	return w
}

// Attach attaches each Go tool natively and its twin, with the same
// bindings, and fails the test when a twin is missing, its name, handles
// or bindings differ from the Go tool's, or the receipts disagree.
func (w *Twins) Attach(t testing.TB, atts ...kernel.Attachment) map[Mode]kernel.AttachReceipt {
	t.Helper()
	twins := make([]kernel.Attachment, len(atts))
	for i, a := range atts {
		m := a.Tool.Manifest()
		tw, err := w.load(m.Name)
		if err != nil {
			t.Fatalf("the twin of %q: %v", m.Name, err)
		}
		tm := tw.Manifest()
		if !slices.Equal(tm.Requires, m.Requires) || !slices.Equal(tm.BindingNames, m.BindingNames) || tm.Description != m.Description {
			t.Fatalf("the twin of %q declares requires %v, bindings %v and %q; the Go tool %v, %v and %q",
				m.Name, tm.Requires, tm.BindingNames, tm.Description, m.Requires, m.BindingNames, m.Description)
		}
		twins[i] = kernel.Attachment{Tool: tw, Bindings: a.Bindings}
	}
	recs := map[Mode]kernel.AttachReceipt{
		Native: w.native.Attach(context.Background(), atts...),
		Twin:   w.twin.Attach(context.Background(), twins...),
	}
	n, tw := recs[Native], recs[Twin]
	if !slices.Equal(n.Attached, tw.Attached) || !sameFailures(n.Failures, tw.Failures) {
		t.Fatalf("attach receipts differ:\nnative: attached %v, failures %+v\ntwin:   attached %v, failures %+v",
			n.Attached, n.Failures, tw.Attached, tw.Failures)
	}
	return recs
}

// MustAttach is Attach, failing the test unless every tool attached.
func (w *Twins) MustAttach(t testing.TB, atts ...kernel.Attachment) {
	t.Helper()
	if rec := w.Attach(t, atts...)[Native]; !rec.OK() {
		t.Fatalf("attach failed: %+v", rec.Failures)
	}
}

// Run runs every case natively and on the twin, each in a subtest, checks
// each outcome against the case, and fails unless the two are identical.
func (w *Twins) Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		if c.NoTwin != "" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			input, err := toJSON(c.Input)
			if err != nil {
				t.Fatalf("input: %v", err)
			}
			outs := map[Mode]protocol.Outcome{}
			for m, env := range map[Mode]*kernel.Environment{Native: w.native, Twin: w.twin} {
				e := &Envs{envs: map[Mode]*kernel.Environment{m: env}}
				outs[m] = e.call(m, c, input).out
			}
			for _, m := range []Mode{Native, Twin} {
				t.Run(string(m), func(t *testing.T) { checkCase(t, c, outs[m]) })
			}
			if diff := OutcomeDiff(outs[Native], outs[Twin]); diff != "" {
				t.Errorf("native and twin outcomes differ: %s", diff)
			}
		})
	}
}

// String describes the twins, for logs.
func (w *Twins) String() string { return fmt.Sprintf("twins %s/%s", Native, Twin) }
