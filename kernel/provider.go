package kernel

import (
	"context"
	"log/slog"

	"github.com/brainrt/brain/handle"
)

// Instance describes the environment a provider is opened for.
type Instance struct {
	// ID names the environment.
	ID string
	// Logger is the environment's logger; never nil.
	Logger *slog.Logger
}

// Provider makes one kind of handle available in an environment. Open is
// its factory: it receives the instance and, through its closure, the
// grants, and is called once at setup. A failing Open leaves the kind out of
// the environment's provides list and is reported on the setup receipt.
type Provider struct {
	Kind handle.Kind
	Open func(ctx context.Context, inst Instance) (Provided, error)
}

// Provided is an opened provider.
type Provided interface {
	// Acquire returns the handle for one call (or one init) and a function
	// that releases it when the call ends. Most providers return the same
	// handle every time; a page provider opens a tab per call.
	Acquire(ctx context.Context) (h any, release func(), err error)
	// Close releases the provider at environment shutdown.
	Close() error
}

// Static wraps a handle that serves every call; closer, if not nil, is
// called by Close.
func Static(h any, closer func() error) Provided { return static{h, closer} }

type static struct {
	h      any
	closer func() error
}

func (s static) Acquire(context.Context) (any, func(), error) { return s.h, noop, nil }

func (s static) Close() error {
	if s.closer == nil {
		return nil
	}
	return s.closer()
}

func noop() {}
