package script

import (
	"math"

	"github.com/dlclark/regexp2/v2"
)

// goja runs the patterns RE2 cannot (backreferences, lookaround) on
// regexp2, a backtracking engine, where /^(a+)+(?=b)/ takes exponential
// time inside one Go call that goja's interrupt cannot stop: the script
// would keep its slot and a CPU long after its call ended, for ever.
// regexp2 has a per-pattern match timeout, but goja compiles patterns
// itself and only the package default reaches them, so this package sets
// that default, process-wide, when it is still "forever".
//
// The value is maxTimeout, the longest a call may last, and not less:
// goja reports a timed-out match as "no match", and a match that started
// within a call can only time out after that call's deadline, when the
// call has already failed with timeout. Guarding each regular-expression
// method with a timer would allow a shorter bound, but redefining
// RegExp.prototype.exec switches goja to its generic, about five times
// slower, regular-expression paths (measured), and exec would otherwise
// stay unguarded.
//
// The default is read when a pattern is compiled, so setting it here,
// before any runtime exists, is free of races.
func init() {
	if regexp2.DefaultMatchTimeout == math.MaxInt64 {
		regexp2.DefaultMatchTimeout = maxTimeout
	}
}
