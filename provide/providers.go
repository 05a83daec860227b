package provide

import (
	"context"
	"fmt"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/fetch"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/provide/script"
)

// Options tune [Providers]. A nil *Options means the defaults.
type Options struct {
	// Resolver resolves host names for the net and page handles. Nil
	// means net.DefaultResolver.
	Resolver fetch.Resolver
}

// Providers returns a [kernel.Provider] for each section of g, in
// [handle.Kinds] order. Nothing is opened until the environment's Setup
// calls each Open, which checks the section (its own Validate and the
// checks across sections that concern it, as [Grants.Validate] does), and
// builds the provider with the instance's logger:
//
//   - fs: [fsroot.New], one handle for every call;
//   - exec: [proc.New], one handle for every call;
//   - net: [fetch.New], one handle for every call;
//   - js: [script.New], one handle for every call;
//   - page: [browser.New], one Chromium for the environment; each call
//     gets a tab of its own, closed when the call ends.
//
// A section that fails to open is left out of the setup receipt's provides
// and listed among its failures. g is copied: later changes to it do not
// reach the providers.
//
//	env := kernel.New(nil)
//	for _, p := range provide.Providers(g, nil) {
//		env.Provide(p)
//	}
//	receipt := env.Setup(ctx)
func Providers(g Grants, opts *Options) []kernel.Provider {
	var o Options
	if opts != nil {
		o = *opts
	}
	g = g.effective()
	var ps []kernel.Provider
	for _, k := range handle.Kinds() {
		if !g.has(k) {
			continue
		}
		open := opener(g, k, o)
		ps = append(ps, kernel.Provider{Kind: k, Open: func(ctx context.Context, inst kernel.Instance) (kernel.Provided, error) {
			if k == handle.KindFS || k == handle.KindExec {
				if err := g.checkWorkspace(); err != nil {
					return nil, fmt.Errorf("grants: %w", err)
				}
			}
			if err := g.checkSection(k); err != nil {
				return nil, fmt.Errorf("grants: %w", err)
			}
			return open(ctx, inst)
		}})
	}
	return ps
}

// opener returns the factory of kind k's provider under g, which must be
// effective and provide k.
func opener(g Grants, k handle.Kind, o Options) func(context.Context, kernel.Instance) (kernel.Provided, error) {
	switch k {
	case handle.KindFS:
		return func(_ context.Context, _ kernel.Instance) (kernel.Provided, error) {
			fs, err := fsroot.New(*g.FS)
			if err != nil {
				return nil, err
			}
			return kernel.Static(fs, fs.Close), nil
		}
	case handle.KindExec:
		return func(_ context.Context, inst kernel.Instance) (kernel.Provided, error) {
			e, err := proc.New(*g.Exec, &proc.Options{Logger: inst.Logger})
			if err != nil {
				return nil, fmt.Errorf("exec grants: %w", err)
			}
			return kernel.Static(e, e.Close), nil
		}
	case handle.KindNet:
		return func(_ context.Context, inst kernel.Instance) (kernel.Provided, error) {
			f, err := fetch.New(*g.Net, &fetch.Options{Logger: inst.Logger, Resolver: o.Resolver})
			if err != nil {
				return nil, fmt.Errorf("net grants: %w", err)
			}
			return kernel.Static(f, f.Close), nil
		}
	case handle.KindJS:
		return func(_ context.Context, inst kernel.Instance) (kernel.Provided, error) {
			js, err := script.New(*g.JS, &script.Options{Logger: inst.Logger})
			if err != nil {
				return nil, err
			}
			return kernel.Static(js, nil), nil
		}
	case handle.KindPage:
		return func(ctx context.Context, inst kernel.Instance) (kernel.Provided, error) {
			p, err := browser.New(ctx, *g.Page, &browser.Options{Logger: inst.Logger, Resolver: o.Resolver})
			if err != nil {
				return nil, err
			}
			return pages{p}, nil
		}
	}
	panic("provide: no provider for handle " + string(k))
}

// pages is the opened page provider: one browser, a tab per call.
type pages struct{ p *browser.Provider }

// Acquire opens a tab; the release closes it.
func (b pages) Acquire(ctx context.Context) (any, func(), error) {
	pg, err := b.p.Open(ctx)
	if err != nil {
		return nil, func() {}, err
	}
	return pg, func() { _ = pg.Close() }, nil
}

// Close stops the browser.
func (b pages) Close() error { return b.p.Close() }

// Environment returns an environment providing the handles g grants, set
// up: the receipt's provides lists the sections that opened, its failures
// those that did not (a missing Chromium, a root that vanished). The error
// is for grants that do not pass [Grants.Validate]; nothing is opened then.
// Close the environment when done.
//
//	g, err := provide.Load("grants.yaml")
//	…
//	env, receipt, err := provide.Environment(ctx, g, &kernel.Options{ID: "local"})
func Environment(ctx context.Context, g Grants, opts *kernel.Options) (*kernel.Environment, kernel.SetupReceipt, error) {
	if err := g.Validate(); err != nil {
		return nil, kernel.SetupReceipt{}, fmt.Errorf("grants: %w", err)
	}
	env := kernel.New(opts)
	for _, p := range Providers(g, nil) {
		if err := env.Provide(p); err != nil {
			_ = env.Close()
			return nil, kernel.SetupReceipt{}, err
		}
	}
	return env, env.Setup(ctx), nil
}
