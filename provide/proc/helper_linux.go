//go:build linux

package proc

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// helperArg0 is the argv[0] that makes a process started from brain's own
// binary act as the exec helper.
const helperArg0 = "brain-exec-helper"

// helperHooked records that RunHelperIfRequested ran in this process, so
// that New can refuse a configuration that needs the helper when main
// never installed it (the helper would then run brain's main instead).
var helperHooked atomic.Bool

// RunHelperIfRequested turns this process into the exec helper when it was
// started as one, and returns at once otherwise. Call it first thing in
// main, and in TestMain of test binaries that run commands:
//
//	func main() {
//		proc.RunHelperIfRequested()
//		…
//	}
//
// In helper mode (and in limiter mode: see limiter_linux.go) it never
// returns. The helper is the fallback for setting
// a child's process limit when brain runs as root where ptrace is not
// allowed (see the package documentation): started as the exec user and
// already confined (namespaces, no_new_privs and Landlock are inherited
// from its starting thread), it lowers its own RLIMIT_NPROC to the
// command's limit and replaces itself with the program. A non-root process
// cannot raise a lowered hard limit, so the program cannot undo it.
// Package init functions of the binary run in the helper too: they must not
// need files outside the Landlock rules.
func RunHelperIfRequested() {
	helperHooked.Store(true)
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case helperArg0:
		os.Exit(runHelper(os.Args[1:]))
	case limiterArg0:
		os.Exit(runLimiter(os.Stdin, os.Stdout))
	}
}

// helperArgv returns the argv that starts the helper for program path with
// argv, under a process limit of nproc.
func helperArgv(nproc int, path string, argv []string) []string {
	h := make([]string, 0, 3+len(argv))
	h = append(h, helperArg0, strconv.Itoa(nproc), path)
	return append(h, argv...)
}

// runHelper applies the limits in args (see helperArgv) and execs the
// program. It returns only on failure, with the exit status to use.
func runHelper(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "brain exec helper: missing arguments")
		return 127
	}
	n, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || n == 0 {
		fmt.Fprintf(os.Stderr, "brain exec helper: bad process limit %q\n", args[0])
		return 127
	}
	lim := unix.Rlimit{Cur: n, Max: n}
	if err := unix.Prlimit(0, unix.RLIMIT_NPROC, &lim, nil); err != nil {
		fmt.Fprintf(os.Stderr, "brain exec helper: set process limit: %v\n", err)
		return 127
	}
	err = syscall.Exec(args[1], args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "brain exec helper: exec: %v\n", err)
	if err == syscall.ENOENT {
		return 127
	}
	return 126
}
