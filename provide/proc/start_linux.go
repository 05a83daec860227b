//go:build linux

package proc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// limitMode is how a child gets its process limit.
type limitMode int

const (
	// (zero): brain does not run as root; no limit, no user switch.
	_ limitMode = iota
	// limitTrace: the child is started as the exec user and traced, so
	// that it stops right after exec; the starting thread (root) sets its
	// RLIMIT_NPROC and lets it go. No second program.
	limitTrace
	// limitHelper: the child is brain's own binary in helper mode, which
	// lowers its own limit and execs the program. Used when ptrace is not
	// allowed here (Yama, seccomp). Costs a Go runtime start per call.
	limitHelper
)

func (m limitMode) String() string {
	switch m {
	case limitTrace:
		return "ptrace"
	case limitHelper:
		return "helper"
	}
	return "none"
}

// startConfined starts the child from a dedicated OS thread that is first
// confined: no_new_privs and Landlock. The exec user's credentials and
// namespaces are the child's alone (attr.Sys.Credential and Cloneflags,
// applied between fork and exec): no thread of brain ever changes user —
// a thread of another user lets that user signal brain and change its
// limits, since permission checks look at the thread.
//
// Why a thread: no_new_privs and Landlock are per-thread in Linux, and a
// new process inherits them from the thread that clones it. Confining one
// throwaway thread confines the child without confining brain and without
// running a second program per call. Re-executing brain's binary as a
// helper that confines itself costs a Go runtime start: 7-10x the cost of
// running /bin/true where this was measured (docs/handle-exec.md). The
// goroutine locks its thread and returns without unlocking it, so the
// runtime ends the thread rather than reuse it — unless it is the main
// thread, which the runtime cannot end and would park, confined, for good:
// onThrowawayThread never confines it. Threads the runtime creates
// meanwhile come from its template thread, not from this one. The
// parent-death signal cannot be used: it fires when the creating thread
// exits, that is at once.
func (e *Exec) startConfined(path string, argv []string, attr *os.ProcAttr, nproc int) (*os.Process, error) {
	type started struct {
		p   *os.Process
		err error
	}
	var s started
	onThrowawayThread(func() { s.p, s.err = e.startOnThread(path, argv, attr, nproc) })
	return s.p, s.err
}

// onThrowawayThread runs f on an OS thread that is not the process's main
// thread and that ends when f returns, so that whatever f does to its
// thread dies with it. It returns when f has returned.
func onThrowawayThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			defer close(done)
			f()
			return // still locked: the runtime ends the thread
		}
		// The main thread: the runtime would park it rather than end it.
		// While this goroutine holds it, another goroutine gets another
		// thread; this one is left as it was and unlocked.
		onThrowawayThread(f)
		runtime.UnlockOSThread()
		close(done)
	}()
	<-done
}

// startOnThread confines the calling, locked thread and starts the child.
func (e *Exec) startOnThread(path string, argv []string, attr *os.ProcAttr, nproc int) (*os.Process, error) {
	if err := restrictThread(e.ruleset, e.abi); err != nil {
		return nil, err
	}
	if e.limit == limitTrace {
		return startTraced(path, argv, attr, nproc, e.setLimit)
	}
	return os.StartProcess(path, argv, attr)
}

// setLimit sets a stopped child's RLIMIT_NPROC: through the limiter when
// there is one, else directly (root with CAP_SYS_RESOURCE).
func (e *Exec) setLimit(pid, nproc int) error {
	if e.limiter != nil {
		return e.limiter.limit(pid, nproc)
	}
	return prlimitNPROC(pid, nproc)
}

// prlimitNPROC sets pid's RLIMIT_NPROC, soft and hard, to nproc.
func prlimitNPROC(pid, nproc int) error {
	lim := unix.Rlimit{Cur: uint64(nproc), Max: uint64(nproc)}
	return unix.Prlimit(pid, unix.RLIMIT_NPROC, &lim, nil)
}

// startTraced starts the child with PTRACE_TRACEME (attr.Sys.Ptrace, with
// the exec user's attr.Sys.Credential), waits for the stop the kernel
// imposes right after a traced exec, before the program's first
// instruction, sets the child's RLIMIT_NPROC to nproc and detaches. The
// calling thread must be the one that forks: ptrace requests come from the
// tracer thread.
//
// Why ptrace: Go runs no code of ours in the child between fork and exec,
// and a prlimit on a running child races with its first fork. Setting
// another user's limit needs CAP_SYS_RESOURCE; where root lacks it
// (containers), setLimit goes through the limiter (limiter_linux.go).
func startTraced(path string, argv []string, attr *os.ProcAttr, nproc int, setLimit func(pid, nproc int) error) (*os.Process, error) {
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return nil, err
	}
	reaped, err := limitStopped(p.Pid, nproc, setLimit)
	if err != nil {
		if !reaped {
			// Stopped before its first instruction: nothing ran.
			_ = p.Kill()
			_, _ = p.Wait()
		}
		return nil, err
	}
	return p, nil
}

// limitStopped waits for traced child pid to stop after its exec, sets its
// process limit and detaches. reaped reports that the child turned out to
// be dead, and was reaped here.
func limitStopped(pid, nproc int, setLimit func(pid, nproc int) error) (reaped bool, err error) {
	var ws unix.WaitStatus
	for {
		_, err = unix.Wait4(pid, &ws, unix.WALL, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return false, fmt.Errorf("wait for the exec stop: %w", err)
	}
	if !ws.Stopped() {
		return ws.Exited() || ws.Signaled(), fmt.Errorf("the child did not stop after exec (status %#x)", uint32(ws))
	}
	if err := setLimit(pid, nproc); err != nil {
		return false, fmt.Errorf("set RLIMIT_NPROC: %w", err)
	}
	// Detaching with signal 0 discards the SIGTRAP of the exec stop.
	if err := unix.PtraceDetach(pid); err != nil {
		return false, fmt.Errorf("ptrace detach: %w", err)
	}
	return false, nil
}

// probeTrace checks, once at setup, that limitTrace works here: it starts
// program traced as the user of cred, stops it before its first
// instruction, sets its limit and kills it. Yama (ptrace_scope 2 or 3) or
// a seccomp filter can forbid it.
func probeTrace(program string, cred *syscall.Credential, setLimit func(pid, nproc int) error) error {
	var err error
	onThrowawayThread(func() {
		var devnull *os.File
		if devnull, err = os.Open(os.DevNull); err != nil {
			return
		}
		defer devnull.Close()
		attr := &os.ProcAttr{
			Dir:   "/",
			Env:   []string{},
			Files: []*os.File{devnull, devnull, devnull},
			Sys:   &syscall.SysProcAttr{Setpgid: true, Ptrace: true, Credential: cred},
		}
		var p *os.Process
		if p, err = startTraced(program, []string{program}, attr, 1, setLimit); err == nil {
			_ = p.Kill()
			if _, err = p.Wait(); err != nil {
				err = fmt.Errorf("reap the probe: %w", err)
			}
		}
	})
	return err
}

// probeUnshare checks that namespaces of the given kinds can be created,
// from a throwaway thread (unshare changes only the calling thread, and a
// new PID namespace only its future children).
func probeUnshare(flags int) error {
	var err error
	// On success the thread is in new namespaces: it must end with the
	// probe, and must not be the main thread, which would be kept.
	onThrowawayThread(func() { err = unix.Unshare(flags) })
	return err
}

// waitExited blocks until process pid has exited, without reaping it, so
// that its process group id stays reserved until the caller reaps it.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// firstProgram returns an allowed program to probe with, the same one each
// time.
func firstProgram(byPath map[string]bool) string {
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths[0]
}
