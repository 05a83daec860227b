package proc

import (
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// Bounds are the limits one command runs under, after [Clamp].
type Bounds struct {
	// Timeout is when the whole process group is killed.
	Timeout time.Duration
	// MaxOutputBytes caps stdout and stderr, each.
	MaxOutputBytes int64
	// MaxProcesses is the child's RLIMIT_NPROC.
	MaxProcesses int
}

// Clamp returns the bounds cmd runs under given grants g: for the timeout
// and the output cap, the smaller of what cmd asks for and what g grants
// (0 in cmd means the grant's); the process count is the grant's, since a
// command cannot ask for it. Zero fields of g mean their defaults. The
// provisioned-tools spec calls this clamp(opts, grants.exec).
//
// A negative request fails with a *handle.CapabilityError of code
// invalid_argument. Clamp does not check g; [New] does.
func Clamp(cmd handle.Command, g Grants) (Bounds, error) {
	return clamp(cmd, g.withDefaults())
}

// clamp is [Clamp] for grants whose defaults are already applied.
func clamp(cmd handle.Command, g Grants) (Bounds, error) {
	if cmd.Timeout < 0 {
		return Bounds{}, handle.Errorf(handle.KindExec, opRun, protocol.CodeInvalidArgument, "timeout %v is negative", cmd.Timeout)
	}
	if cmd.MaxOutput < 0 {
		return Bounds{}, handle.Errorf(handle.KindExec, opRun, protocol.CodeInvalidArgument, "maxOutput %d is negative", cmd.MaxOutput)
	}
	b := Bounds{Timeout: g.Timeout, MaxOutputBytes: g.MaxOutputBytes, MaxProcesses: g.MaxProcesses}
	if cmd.Timeout > 0 && cmd.Timeout < b.Timeout {
		b.Timeout = cmd.Timeout
	}
	if cmd.MaxOutput > 0 && cmd.MaxOutput < b.MaxOutputBytes {
		b.MaxOutputBytes = cmd.MaxOutput
	}
	return b, nil
}
