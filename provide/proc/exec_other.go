//go:build !linux

package proc

import (
	"context"
	"errors"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// Exec runs allow-listed programs under [Grants]. It is implemented on
// Linux only: its confinement (process groups, no_new_privs, Landlock,
// network namespaces) is Linux's.
type Exec struct{}

// New fails: the exec handle needs Linux.
func New(g Grants, opts *Options) (*Exec, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return nil, errors.New("exec handle: needs Linux")
}

// Run fails with unavailable.
func (e *Exec) Run(ctx context.Context, cmd handle.Command) (handle.Result, error) {
	return handle.Result{}, handle.Errorf(handle.KindExec, opRun, protocol.CodeUnavailable, "the exec handle needs Linux")
}

// Close does nothing.
func (e *Exec) Close() error { return nil }

// Landlock returns 0.
func (e *Exec) Landlock() int { return 0 }
