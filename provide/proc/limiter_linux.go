//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// limiterArg0 is the argv[0] that makes a process started from brain's own
// binary act as the limiter.
const limiterArg0 = "brain-exec-limiter"

// limiter is a process of the exec user that sets the process limit of
// that user's children on request, for the ptrace path where root lacks
// CAP_SYS_RESOURCE (containers; this machine kind): setting another
// process's limit needs that capability, or to be the process's own user
// (the same real uid and gid). Brain's own threads never become that user
// — a thread of another user lets that user signal brain and change its
// limits, since the kernel checks permissions against the thread — so a
// process of its own, started once, does it: the exec user's credentials
// live in it and in the children only.
//
// It reads "pid nproc" lines from its standard input and answers each
// with "ok" or "error: …"; it exits when its input closes (brain closed
// the Exec, or died). Children live in PID namespaces of their own and
// cannot address it; another process of the exec user could kill it, and
// then commands fail to start (the limit is never skipped).
type limiter struct {
	mu   sync.Mutex
	proc *os.Process
	w    *os.File
	r    *bufio.Reader
	err  error // set once the limiter is gone: every later request fails
}

// startLimiter starts the limiter as the user of cred. It needs
// RunHelperIfRequested in main, like the exec helper.
func startLimiter(cred *syscall.Credential) (*limiter, error) {
	if !helperHooked.Load() {
		return nil, errors.New("proc.RunHelperIfRequested() was not called first thing in main")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	defer devnull.Close()
	p, err := os.StartProcess("/proc/self/exe", []string{limiterArg0}, &os.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []*os.File{inR, outW, devnull},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: cred},
	})
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start the exec limiter: %w", err)
	}
	return &limiter{proc: p, w: inW, r: bufio.NewReader(outR)}, nil
}

// limit sets RLIMIT_NPROC of process pid (a child of the exec user) to
// nproc, soft and hard.
func (l *limiter) limit(pid, nproc int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if _, err := fmt.Fprintf(l.w, "%d %d\n", pid, nproc); err != nil {
		l.err = fmt.Errorf("the exec limiter is gone: %w", err)
		return l.err
	}
	line, err := l.r.ReadString('\n')
	if err != nil {
		l.err = fmt.Errorf("the exec limiter is gone: %w", err)
		return l.err
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return fmt.Errorf("the exec limiter: %s", strings.TrimPrefix(line, "error: "))
	}
	return nil
}

// close ends the limiter (its input closes) and reaps it.
func (l *limiter) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.w.Close()
	_, _ = l.proc.Wait()
	if l.err == nil {
		l.err = errors.New("the exec limiter was closed")
	}
}

// runLimiter is the limiter process's main: it serves requests until its
// input closes, and returns the exit status.
func runLimiter(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var pid, n int
		var err error
		if len(f) != 2 {
			err = errors.New("want \"pid nproc\"")
		} else if pid, err = strconv.Atoi(f[0]); err == nil {
			n, err = strconv.Atoi(f[1])
		}
		if err == nil && (pid <= 0 || n <= 0) {
			err = errors.New("pid and nproc must be positive")
		}
		if err == nil {
			lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
			err = unix.Prlimit(pid, unix.RLIMIT_NPROC, &lim, nil)
		}
		if err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
		} else {
			fmt.Fprintln(out, "ok")
		}
	}
	return 0
}
