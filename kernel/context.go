package kernel

import (
	"context"
	"time"
)

// toolContext is the context a tool runs with: the caller's deadline and
// cancellation, and nothing else. Why not the caller's context itself: it
// reaches, through its fields, the session's call, its registration and
// this environment — with every provider. A tool must reach exactly the
// handles it declared, even by reflection, so the parent is held only by
// closures, which reflection cannot open, and no values pass through.
type toolContext struct {
	done     <-chan struct{}
	deadline time.Time
	ok       bool
	err      func() error
}

func newToolContext(parent context.Context) context.Context {
	d, ok := parent.Deadline()
	return &toolContext{done: parent.Done(), deadline: d, ok: ok, err: func() error { return parent.Err() }}
}

func (c *toolContext) Deadline() (time.Time, bool) { return c.deadline, c.ok }
func (c *toolContext) Done() <-chan struct{}       { return c.done }
func (c *toolContext) Err() error                  { return c.err() }

// Value returns nil: no context values reach a tool.
func (c *toolContext) Value(any) any { return nil }
