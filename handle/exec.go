package handle

import (
	"context"
	"time"
)

// Exec runs programs. There is never a shell: a [Command] is a program and
// its arguments. Which programs may run, where, with which environment and
// within which bounds is decided by grants the tool does not see; a request
// beyond them is clamped (timeouts, output) or fails with denied.
type Exec interface {
	// Run starts the command, waits for it and returns what it did. A
	// command that exits non-zero is not an error: see Result.ExitCode.
	// Errors are *CapabilityError: denied (program not allowed, environment
	// variable not allowed), path_escape (Dir outside the root), timeout
	// (the whole process group was killed at the deadline), cancelled.
	Run(ctx context.Context, cmd Command) (Result, error)
}

// Command is one program to run.
type Command struct {
	// Program is a name looked up on the grant's allow-list, or a path.
	Program string `json:"program"`
	// Args are the arguments after the program name.
	Args []string `json:"args,omitempty"`
	// Dir is the working directory, relative to the fs root; "" is the root.
	Dir string `json:"dir,omitempty"`
	// Env adds variables; each must be allowed by the grant.
	Env map[string]string `json:"env,omitempty"`
	// Stdin is written to the program's standard input.
	Stdin []byte `json:"stdin,omitempty"`
	// Timeout asks for a shorter deadline than the grant's; 0 means the
	// grant's.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxOutput asks for a smaller output cap than the grant's; 0 means the
	// grant's.
	MaxOutput int64 `json:"maxOutput,omitempty"`
}

// Result is what a finished program did.
type Result struct {
	// ExitCode is the exit status; -1 when the program was killed by a
	// signal.
	ExitCode int `json:"exitCode"`
	// Stdout and Stderr hold at most the output cap each.
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	// Truncated reports that output beyond the cap was discarded.
	Truncated bool `json:"truncated,omitempty"`
	// Duration is the wall time from start to exit.
	Duration time.Duration `json:"duration"`
}
