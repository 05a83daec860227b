package script

import (
	"fmt"
	"time"

	"github.com/brainrt/brain/provide/grant"
)

// Defaults applied by [New] to zero-valued [Grants] fields.
const (
	DefaultTimeout              = 5 * time.Second
	DefaultMaxScriptBytes       = 64 << 10
	DefaultMaxArgsBytes         = 1 << 20
	DefaultMaxResultBytes       = 1 << 20
	DefaultMaxMemoryBytes int64 = 128 << 20
)

// Upper bounds [Grants.Validate] enforces. Each exists for a reason beyond
// taste:
//   - maxTimeout: how long a call may hold a slot and a CPU.
//   - maxScriptBytes: what one call may hand the engine's parser, which
//     bounds its own recursion (a syntax error past its stack limit).
//   - minMemoryBytes: a realm's heap takes a few hundred KiB once made, and
//     a budget must leave room for ordinary work on top.
//   - maxMemoryBytes: the slots (and the scripts left lingering inside a
//     built-in, four a slot) times the budget bound what the handle takes
//     from the process.
//   - maxResultBytes: a result is held two or three times over while it
//     is encoded and handed on.
//   - argsPerMemory: the engine's JSON.parse takes up to about 128 bytes
//     of heap a byte of JSON (an array of empty arrays is the worst), out
//     of the call's budget.
const (
	maxTimeout     = 30 * time.Second
	maxScriptBytes = 64 << 10
	maxResultBytes = 64 << 20
	argsPerMemory  = 128
	minMemoryBytes = 4 << 20
	maxMemoryBytes = 128 << 20
)

// Grants is the policy of a js handle: how long a script may run and how
// much it may take in and give back. The tool never sees it. The zero value
// of every field means its default.
type Grants struct {
	// Timeout bounds one call, from the moment it starts waiting for a free
	// runtime to its result; the caller's context deadline applies too,
	// whichever comes first. At most 30s. Default: 5s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxScriptBytes caps the source of a call, and any string the script
	// compiles at run time with eval or the Function constructors (the
	// call then ends too_large). At most 64 KiB, the default.
	MaxScriptBytes int `yaml:"max_script_bytes"`
	// MaxArgsBytes caps the JSON arguments of a call. At most
	// MaxMemoryBytes/128. Default: 1 MiB, or MaxMemoryBytes/128 when that
	// is less.
	MaxArgsBytes int `yaml:"max_args_bytes"`
	// MaxResultBytes caps the JSON encoding of a call's result. At most
	// 64 MiB. Default: 1 MiB.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// MaxMemoryBytes is the memory budget of one call: how much the call
	// may add to its realm's heap, enforced by the engine's allocator (an
	// allocation that would pass it ends the call too_large), and the
	// base of the longest length the guarded Array methods walk
	// (MaxMemoryBytes/16 elements). From 4 MiB to 128 MiB. Default:
	// 128 MiB.
	MaxMemoryBytes int64 `yaml:"max_memory_bytes"`
}

// Validate reports the first problem in g as a *[grant.FieldError] naming
// the YAML field ("timeout", "max_memory_bytes"), or nil.
func (g Grants) Validate() error {
	switch {
	case g.Timeout < 0:
		return grant.Errorf("timeout", "%s: must not be negative", g.Timeout)
	case g.Timeout > maxTimeout:
		return grant.Errorf("timeout", "%s: at most %s", g.Timeout, maxTimeout)
	}
	if err := checkSize("max_script_bytes", int64(g.MaxScriptBytes), 0, maxScriptBytes); err != nil {
		return err
	}
	if err := checkSize("max_result_bytes", int64(g.MaxResultBytes), 0, maxResultBytes); err != nil {
		return err
	}
	if g.MaxMemoryBytes != 0 {
		if err := checkSize("max_memory_bytes", g.MaxMemoryBytes, minMemoryBytes, maxMemoryBytes); err != nil {
			return err
		}
	}
	memory := g.withDefaults().MaxMemoryBytes
	if err := checkSize("max_args_bytes", int64(g.MaxArgsBytes), 0, memory/argsPerMemory); err != nil {
		if g.MaxArgsBytes > 0 {
			err.Msg += fmt.Sprintf(" (max_memory_bytes/%d: parsing JSON takes up to %d bytes of memory a byte)", argsPerMemory, argsPerMemory)
		}
		return err
	}
	return nil
}

// checkSize reports a *grant.FieldError unless 0 <= n, min <= n <= max.
func checkSize(field string, n, lo, hi int64) *grant.FieldError {
	switch {
	case n < 0:
		return grant.Errorf(field, "%d: must not be negative", n)
	case n < lo:
		return grant.Errorf(field, "%d: at least %d", n, lo)
	case n > hi:
		return grant.Errorf(field, "%d: at most %d", n, hi)
	}
	return nil
}

// withDefaults returns g with zero fields set to their defaults.
func (g Grants) withDefaults() Grants {
	if g.Timeout == 0 {
		g.Timeout = DefaultTimeout
	}
	if g.MaxScriptBytes == 0 {
		g.MaxScriptBytes = DefaultMaxScriptBytes
	}
	if g.MaxResultBytes == 0 {
		g.MaxResultBytes = DefaultMaxResultBytes
	}
	if g.MaxMemoryBytes == 0 {
		g.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if g.MaxArgsBytes == 0 {
		g.MaxArgsBytes = int(min(DefaultMaxArgsBytes, g.MaxMemoryBytes/argsPerMemory))
	}
	return g
}
