package script

import (
	"math"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// goja runs the patterns RE2 cannot (backreferences, lookaround) on
// regexp2, a backtracking engine, where /^(a+)+(?=b)/ takes exponential
// time inside one Go call that goja's interrupt cannot stop. regexp2 has a
// per-pattern match timeout, but goja compiles patterns itself and only the
// package default reaches them, so this package sets that default,
// process-wide, when it is still "forever". The default is read when a
// pattern is compiled, so setting it here, before any runtime exists, is
// free of races.
//
// The value, matchTimeout, is DefaultTimeout (5s). A runaway match thus
// ends at most 5s after it started, which bounds how long an abandoned
// script keeps a CPU (its call gave its slot back at its deadline; see
// Runtime.Call). goja reports a timed-out match as "no match", a wrong
// answer that a script must never see, which holds on its own for calls of
// at most matchTimeout: a match that started within such a call can only
// time out after the call's deadline, when the call has already failed
// with timeout. A Runtime whose Timeout is longer times every
// regular-expression operation instead (guardRegExp), and turns one that
// ran for matchTimeout into a timeout of the call; only those Runtimes pay
// for the guard.
var matchTimeout = func() time.Duration {
	if regexp2.DefaultMatchTimeout == math.MaxInt64 {
		regexp2.DefaultMatchTimeout = DefaultTimeout
	}
	return regexp2.DefaultMatchTimeout
}()

// matchTimeoutSlack is how much earlier than matchTimeout an operation
// may end and still be taken for a match regexp2 cut short: regexp2 sets a
// match's deadline from a coarse clock that a goroutine updates every
// 100 ms, and on a loaded machine that clock lags, so a match can be
// stopped a few hundred milliseconds before matchTimeout has passed. An
// operation that truly finished in the last second before it is reported
// as a timeout: a call that fails is better than one that answers "no
// match" wrongly.
const matchTimeoutSlack = time.Second

// guardRegExp wraps the methods of RegExp.prototype through which goja
// runs a match — exec, test and the Symbol.match, matchAll, replace,
// search and split methods that the String methods call — so that an
// operation that ran for as long as regexp2 lets one match run stops the
// call with timeout: a match in it was cut short, and its "no match" is
// not an answer. (goja's test and its fast paths match directly, not
// through exec, so exec alone would not see them.)
func (c *call) guardRegExp(vm *goja.Runtime, global *goja.Object) {
	proto := object(object(global.Get("RegExp")).Get("prototype"))
	timed := func(orig goja.Callable, this goja.Value, args []goja.Value) goja.Value {
		start := time.Now()
		v := c.invoke(orig, this, args...)
		if d := time.Since(start); d >= matchTimeout-matchTimeoutSlack {
			c.abort(handle.Errorf(handle.KindJS, opCall, protocol.CodeTimeout,
				"a regular expression ran for %s, as long as one match may run; it was stopped", d.Round(time.Millisecond)))
		}
		return v
	}
	for _, key := range []any{"exec", "test", goja.SymMatch, goja.SymMatchAll, goja.SymReplace, goja.SymSearch, goja.SymSplit} {
		c.replace(vm, proto, key, timed)
	}
}
