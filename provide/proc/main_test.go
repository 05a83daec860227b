//go:build linux

package proc_test

import (
	"os"
	"testing"

	"github.com/brainrt/brain/provide/proc"
)

// TestMain installs the exec helper: as root, every command starts as this
// test binary in helper mode, which applies the process limit and execs the
// program.
func TestMain(m *testing.M) {
	proc.RunHelperIfRequested()
	if os.Getenv(threadsProgramEnv) != "" {
		os.Exit(threadsProgram()) // TestNoThreadRunsAsTheExecUser's program
	}
	os.Exit(m.Run())
}
