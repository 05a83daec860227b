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
//   - maxTimeout: how long a call may hold a slot and a CPU. (The match
//     timeout of the backtracking regexp engine is DefaultTimeout; longer
//     timeouts time every regular-expression operation: see regexp.go.)
//   - maxScriptBytes: goja's parser is recursive descent; a "(" costs it 2
//     to 4 KiB of goroutine stack (measured), the most of any byte. Go
//     kills the whole process when a goroutine's stack would pass 1 GB,
//     and stacks grow by doubling, so 512 MiB is the real ceiling: 64 KiB
//     of "(" needs at most 256 MiB.
//   - minMemoryBytes: the heap watchdog measures the whole process, whose
//     own noise is a few MiB.
//   - maxMemoryBytes: goja walks prototype and proxy chains recursively in
//     Go; an assignment through a chain costs 170 to 670 bytes of goroutine
//     stack a level (measured), up to 1.8 times the chain's heap. Go kills
//     the process when a goroutine's stack would pass 1 GB, and stacks
//     grow by doubling, so 512 MiB is the real ceiling; a 128 MiB budget
//     keeps a chain's walk under about 350 MiB, and under 512 MiB even at
//     twice the budget, which the watchdog's imprecision can allow.
//   - maxResultBytes: a result is held two or three times over while it
//     is encoded and handed on.
//   - argsPerMemory: the reader of the arguments (args.go) allocates 25
//     to 225 bytes per byte of JSON, as JSON.parse does (measured; an
//     array of empty arrays is the worst), in one step of Go code that
//     only a stop checked between values can interrupt.
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
	// compiles at run time with eval or the Function constructors. At most
	// 64 KiB, the default.
	MaxScriptBytes int `yaml:"max_script_bytes"`
	// MaxArgsBytes caps the JSON arguments of a call. At most
	// MaxMemoryBytes/128. Default: 1 MiB, or MaxMemoryBytes/128 when that
	// is less.
	MaxArgsBytes int `yaml:"max_args_bytes"`
	// MaxResultBytes caps the JSON encoding of a call's result. At most
	// 64 MiB. Default: 1 MiB.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// MaxMemoryBytes is the memory budget of one call: how far the live
	// heap may grow while the script runs, and the base of the size limits
	// on built-ins that allocate in one step (see the package
	// documentation, "Memory"). It is enforced on a best-effort basis, not
	// exactly. From 4 MiB to 128 MiB. Default: 128 MiB.
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

// limits are the per-call bounds derived from the grants, in the units the
// guards count in.
type limits struct {
	// memory is the heap budget in bytes.
	memory int64
	// units is the longest string a guarded built-in may build, in UTF-16
	// code units (goja stores a non-ASCII string at two bytes a unit).
	units int64
	// elements caps array lengths that built-ins walk or allocate slot by
	// slot (a slot is a 16-byte interface value).
	elements int64
	// records caps work that makes an object or a string per element or
	// per character (Object.keys, split, regular expression match lists,
	// JSON.parse), measured at 40 to 250 bytes each.
	records int64
	// script caps strings compiled at run time, in code units.
	script int64
}

func newLimits(g Grants) limits {
	m := g.MaxMemoryBytes
	return limits{memory: m, units: m / 2, elements: m / 16, records: m / 128, script: int64(g.MaxScriptBytes)}
}
