//go:build linux

package proc

import "testing"

// ForceHelper makes New start commands through the exec helper instead of
// ptrace until the test ends.
func ForceHelper(t testing.TB) {
	forceHelper.Store(true)
	t.Cleanup(func() { forceHelper.Store(false) })
}

// LimitMode reports how e applies the process limit: none, ptrace or
// helper.
func LimitMode(e *Exec) string { return e.limit.String() }
