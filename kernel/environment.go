package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/workers"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/tool"
)

// Options configure an [Environment]. A nil *Options means the defaults.
type Options struct {
	// ID names the environment in receipts and logs. Default "local".
	ID string
	// Workspace is shown to tools as their workspace's name.
	Workspace string
	// Logger receives the environment's logs; nil discards them.
	Logger *slog.Logger
	// CallTimeout bounds a call whose context has no earlier deadline.
	// Default 60 s.
	CallTimeout time.Duration
	// Session, when set, receives every attached tool as an agent-side
	// capability (origin agent); Detach deregisters it.
	Session *session.Session
	// Policies set how tools are offered as capabilities (approval,
	// audience, timeout, display name, prompt fragment), by name or glob;
	// see [PolicyRule]. An invalid rule makes every Attach fail with
	// invalid_request naming it.
	Policies []PolicyRule
}

// Environment provides handles under grants and hosts tools. It is safe for
// concurrent use once set up.
type Environment struct {
	opts Options
	log  *slog.Logger

	mu        sync.RWMutex
	providers []Provider
	provided  map[handle.Kind]Provided // set by Setup
	setUp     bool
	tools     map[string]*attached
	sessions  []*session.Session // exposed: they get every attached tool

	workers *workers.Pool[*job] // run bounded calls
}

// attached is a provisioned tool.
type attached struct {
	manifest tool.Manifest
	input    *session.Schema
	output   *session.Schema // validated for hosted payloads only
	inst     tool.Instance
	policy   Policy // from Options.Policies
}

// New returns an environment with no providers.
func New(opts *Options) *Environment {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ID == "" {
		o.ID = "local"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	o.Policies = slices.Clone(o.Policies)
	e := &Environment{opts: o, log: o.Logger.With(slog.String("environment", o.ID)), tools: map[string]*attached{}}
	e.workers = workers.New(e.runJob, 10*time.Second)
	if o.Session != nil {
		e.sessions = []*session.Session{o.Session}
	}
	return e
}

// Provide registers a provider. It must be called before Setup; providing a
// kind twice replaces the first.
func (e *Environment) Provide(p Provider) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.setUp {
		return fmt.Errorf("provide %s: the environment is already set up", p.Kind)
	}
	if _, err := handle.ParseKind(string(p.Kind)); err != nil {
		return fmt.Errorf("provide: %w", err)
	}
	e.providers = slices.DeleteFunc(e.providers, func(q Provider) bool { return q.Kind == p.Kind })
	e.providers = append(e.providers, p)
	return nil
}

// SetupReceipt says what an environment provides.
type SetupReceipt struct {
	Environment string        `json:"environment"`
	Provides    []handle.Kind `json:"provides"`
	Failures    []Failure     `json:"failures,omitempty"`
}

// Failure is one thing that failed on a receipt: which provider or tool,
// a code and why.
type Failure struct {
	Name   string        `json:"name"`
	Code   protocol.Code `json:"code"`
	Reason string        `json:"reason"`
}

// Setup opens every provider. The receipt's Provides lists exactly the
// kinds that opened; each that did not is a Failure (code unavailable, or
// the provider's own code). Setup runs once; later calls return the same
// provides list.
func (e *Environment) Setup(ctx context.Context) SetupReceipt {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := SetupReceipt{Environment: e.opts.ID, Provides: []handle.Kind{}}
	if e.setUp {
		rec.Provides = e.providesLocked()
		return rec
	}
	e.provided = map[handle.Kind]Provided{}
	inst := Instance{ID: e.opts.ID, Logger: e.log}
	for _, p := range e.providers {
		pv, err := p.Open(ctx, inst)
		if err != nil {
			code := handle.CodeOf(err)
			if code == "" {
				code = protocol.CodeUnavailable
			}
			rec.Failures = append(rec.Failures, Failure{Name: string(p.Kind), Code: code, Reason: err.Error()})
			e.log.Warn("provider unavailable", slog.String("handle", string(p.Kind)), slog.String("reason", err.Error()))
			continue
		}
		e.provided[p.Kind] = pv
	}
	e.setUp = true
	rec.Provides = e.providesLocked()
	return rec
}

func (e *Environment) providesLocked() []handle.Kind {
	out := make([]handle.Kind, 0, len(e.provided))
	for k := range e.provided {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Close detaches every tool and closes the providers.
func (e *Environment) Close() error {
	e.mu.Lock()
	names := make([]string, 0, len(e.tools))
	for n := range e.tools {
		names = append(names, n)
	}
	e.mu.Unlock()
	e.Detach(names...)
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for k, p := range e.provided {
		if err := p.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s provider: %w", k, err))
		}
	}
	e.provided = nil
	return errors.Join(errs...)
}

// acquire gets the handles kinds name, releasing them all if one fails.
func (e *Environment) acquire(ctx context.Context, kinds []handle.Kind) (tool.Handles, func(), error) {
	var hs tool.Handles
	if len(kinds) == 0 {
		return hs, noop, nil
	}
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, k := range kinds {
		p, ok := e.provided[k]
		if !ok {
			release()
			return hs, noop, &handle.CapabilityError{Handle: k, Op: "acquire", Code: protocol.CodeUnavailable,
				Message: fmt.Sprintf("this environment does not provide the %s handle", k)}
		}
		h, r, err := p.Acquire(ctx)
		if err != nil {
			release()
			return hs, noop, err
		}
		releases = append(releases, r)
		if err := hs.Set(k, h); err != nil {
			release()
			return hs, noop, err
		}
	}
	if len(releases) == 1 {
		return hs, releases[0], nil
	}
	return hs, release, nil
}
