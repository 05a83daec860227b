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
	// limitTrace: the starting thread becomes the exec user, starts the
	// child traced so that it stops right after exec, sets its
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
// confined: namespaces, no_new_privs, Landlock and, with limitTrace, the
// exec user's credentials.
//
// Why a thread: all of these are per-thread in Linux, and a new process
// inherits them from the thread that clones it. Confining one throwaway
// thread confines the child without confining brain and without running a
// second program per call. Re-executing brain's binary as a helper that
// confines itself costs a Go runtime start: 7-10x the cost of running
// /bin/true where this was measured (docs/handle-exec.md). The goroutine
// locks its thread and returns without unlocking it, so the runtime ends
// the thread rather than reuse it; threads the runtime creates meanwhile
// come from its template thread, not from this one. The parent-death signal cannot be
// used: it fires when the creating thread exits, that is at once.
func (e *Exec) startConfined(path string, argv []string, attr *os.ProcAttr, nproc int) (*os.Process, error) {
	type started struct {
		p   *os.Process
		err error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		p, err := e.startOnThread(path, argv, attr, nproc)
		ch <- started{p, err}
	}()
	s := <-ch
	return s.p, s.err
}

// startOnThread confines the calling, locked thread and starts the child.
func (e *Exec) startOnThread(path string, argv []string, attr *os.ProcAttr, nproc int) (*os.Process, error) {
	if e.limit == limitTrace && e.clone != 0 {
		// Entering namespaces needs CAP_SYS_ADMIN, which the thread loses
		// when it becomes the exec user below: enter them now, and the
		// child is born in them (the first child of the thread is PID 1 of
		// the new PID namespace).
		if err := unix.Unshare(int(e.clone)); err != nil {
			return nil, fmt.Errorf("unshare: %w", err)
		}
	}
	if err := restrictThread(e.ruleset, e.abi); err != nil {
		return nil, err
	}
	if e.limit == limitTrace {
		return startTraced(path, argv, attr, e.cred, nproc)
	}
	return os.StartProcess(path, argv, attr)
}

// startTraced turns the calling thread into the user of cred, starts the
// child with PTRACE_TRACEME (attr.Sys.Ptrace), waits for the stop the
// kernel imposes right after a traced exec, before the program's first
// instruction, sets the child's RLIMIT_NPROC to nproc and detaches.
//
// Why the user switch: setting another user's limits needs
// CAP_SYS_RESOURCE, which root may lack (containers); a thread that is the
// same user as the child needs nothing. Why ptrace: Go runs no code of ours
// in the child between fork and exec, and a prlimit on a running child
// races with its first fork.
func startTraced(path string, argv []string, attr *os.ProcAttr, cred *syscall.Credential, nproc int) (*os.Process, error) {
	if err := becomeUser(cred); err != nil {
		return nil, err
	}
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return nil, err
	}
	reaped, err := limitStopped(p.Pid, nproc)
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

// becomeUser sets the calling thread's credentials, and only its own: the
// raw system calls, unlike syscall.Setuid, do not apply to every thread of
// brain. The thread is never reused (see startConfined).
func becomeUser(c *syscall.Credential) error {
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); errno != 0 {
		return fmt.Errorf("setgroups: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(c.Gid), uintptr(c.Gid), uintptr(c.Gid)); errno != 0 {
		return fmt.Errorf("setresgid(%d): %w", c.Gid, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(c.Uid), uintptr(c.Uid), uintptr(c.Uid)); errno != 0 {
		return fmt.Errorf("setresuid(%d): %w", c.Uid, errno)
	}
	return nil
}

// limitStopped waits for traced child pid to stop after its exec, sets its
// process limit and detaches. reaped reports that the child turned out to
// be dead, and was reaped here.
func limitStopped(pid, nproc int) (reaped bool, err error) {
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
	lim := unix.Rlimit{Cur: uint64(nproc), Max: uint64(nproc)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &lim, nil); err != nil {
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
func probeTrace(program string, cred *syscall.Credential) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread changes user
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			ch <- err
			return
		}
		defer devnull.Close()
		attr := &os.ProcAttr{
			Dir:   "/",
			Env:   []string{},
			Files: []*os.File{devnull, devnull, devnull},
			Sys:   &syscall.SysProcAttr{Setpgid: true, Ptrace: true},
		}
		p, err := startTraced(program, []string{program}, attr, cred, 1)
		if err == nil {
			_ = p.Kill()
			_, err = p.Wait()
			if err != nil {
				err = fmt.Errorf("reap the probe: %w", err)
			}
		}
		ch <- err
	}()
	return <-ch
}

// probeUnshare checks that namespaces of the given kinds can be created,
// from a throwaway thread (unshare changes only the calling thread, and a
// new PID namespace only its future children).
func probeUnshare(flags int) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := unix.Unshare(flags)
		if err != nil {
			// Nothing changed: the thread may be reused.
			runtime.UnlockOSThread()
		}
		// On success the thread is in new namespaces and is never
		// unlocked, so the runtime ends it.
		ch <- err
	}()
	return <-ch
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
