//go:build linux

package proc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/grant"
	"golang.org/x/sys/unix"
)

// forceHelper makes New choose the exec helper over ptrace, so that tests
// cover both (export_test.go).
var forceHelper atomic.Bool

// drainDelay bounds how long Run waits for the output pipes to close after
// the process group is gone. Only a process that left the group (setsid)
// while holding a pipe makes Run wait that long; the pipes are then closed
// on our side and the call returns.
const drainDelay = 250 * time.Millisecond

// systemDirs are readable (and executable) by every child under Landlock.
var systemDirs = []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"}

// devReadWrite lets a child open a device for reading and writing,
// truncating included (a shell's "> /dev/null").
const devReadWrite = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE

// devFiles are the device files a child may use under Landlock, with the
// rights it gets on them.
var devFiles = []pathRule{
	{path: "/dev/null", access: devReadWrite, optional: true},
	{path: "/dev/zero", access: llReadOnly, optional: true},
	{path: "/dev/full", access: devReadWrite, optional: true},
	{path: "/dev/random", access: llReadOnly, optional: true},
	{path: "/dev/urandom", access: llReadOnly, optional: true},
}

// Exec runs allow-listed programs under [Grants]; it implements
// handle.Exec. Create one with [New]. Run is safe for concurrent use.
type Exec struct {
	g        Grants // defaults applied, slices and maps owned
	rootPath string
	byName   map[string]string // allowed name → resolved absolute path
	byPath   map[string]bool   // allowed absolute paths
	baseEnv  []string          // "K=V" from g.Env, sorted
	allowEnv map[string]bool
	cred     *syscall.Credential // nil: children run as brain's own user
	limit    limitMode           // how children get RLIMIT_NPROC
	limiter  *limiter            // with limitTrace where root lacks CAP_SYS_RESOURCE; nil otherwise
	clone    uintptr             // clone flags: CLONE_NEWNET, CLONE_NEWPID
	abi      int                 // Landlock ABI in use, 0 when off
	logger   *slog.Logger

	mu      sync.RWMutex // guards root and ruleset against Close
	closed  bool
	root    *os.Root
	ruleset int // Landlock ruleset descriptor, -1 when off
}

// New validates g, resolves the allow-list, probes the kernel (Landlock,
// network namespaces) and returns an Exec. Errors about the grants are
// *grant.FieldError naming the field. opts may be nil. Close releases the
// root and the Landlock ruleset.
//
//	e, err := proc.New(proc.Grants{Root: "/srv/work", Allow: []string{"git"}}, nil)
//	res, err := e.Run(ctx, handle.Command{Program: "git", Args: []string{"status"}})
func New(g Grants, opts *Options) (*Exec, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	g = g.withDefaults()
	g.Allow = slices.Clone(g.Allow)
	g.Path = slices.Clone(g.Path)
	g.AllowEnv = slices.Clone(g.AllowEnv)
	g.Root = filepath.Clean(g.Root)
	if g.User != nil {
		u := *g.User
		g.User = &u
	}
	e := &Exec{rootPath: g.Root, allowEnv: make(map[string]bool), ruleset: -1, logger: logger}

	fi, err := os.Stat(g.Root)
	if err != nil {
		return nil, grant.Errorf("root", "%v", err)
	}
	if !fi.IsDir() {
		return nil, grant.Errorf("root", "%q is not a directory", g.Root)
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		// Working directories are handed to the child as /proc/self/fd/N.
		return nil, fmt.Errorf("exec handle needs /proc: %w", err)
	}
	if e.byName, e.byPath, err = resolveAllow(g); err != nil {
		return nil, err
	}
	env := make(map[string]string, len(g.Env)+1)
	for k, v := range g.Env {
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = strings.Join(g.Path, ":")
	}
	g.Env = env
	for k, v := range env {
		e.baseEnv = append(e.baseEnv, k+"="+v)
	}
	sort.Strings(e.baseEnv)
	for _, k := range g.AllowEnv {
		e.allowEnv[k] = true
	}
	e.g = g

	if err := e.setUser(fi); err != nil {
		return nil, err
	}
	if !g.Network {
		if err := probeUnshare(unix.CLONE_NEWNET); err != nil {
			return nil, grant.Errorf("network", "false needs a new network namespace, which failed here (%v): run brain as root, or set network: true", err)
		}
		e.clone |= unix.CLONE_NEWNET
	}
	if os.Geteuid() == 0 {
		// A PID namespace per command: when the program exits, the kernel
		// kills everything left in it, including processes that left the
		// process group with setsid. Not a grant: it changes nothing a tool
		// can rely on except that nothing outlives the call.
		if err := probeUnshare(unix.CLONE_NEWPID); err != nil {
			logger.Warn("exec: no PID namespace: a child that calls setsid can outlive its call", logKeyErr, err)
		} else {
			e.clone |= unix.CLONE_NEWPID
		}
	}
	if err := e.setLandlock(); err != nil {
		return nil, err
	}
	if e.root, err = os.OpenRoot(g.Root); err != nil {
		e.closeRuleset()
		return nil, grant.Errorf("root", "%v", err)
	}
	return e, nil
}

// resolveAllow looks every name of g.Allow up in g.Path and checks every
// absolute entry.
func resolveAllow(g Grants) (byName map[string]string, byPath map[string]bool, err error) {
	byName, byPath = make(map[string]string), make(map[string]bool)
	realRoot, err := filepath.EvalSymlinks(g.Root)
	if err != nil {
		return nil, nil, grant.Errorf("root", "%v", err)
	}
	for i, a := range g.Allow {
		field := fmt.Sprintf("allow[%d]", i)
		found := ""
		if filepath.IsAbs(a) {
			if err := checkProgram(a); err != nil {
				return nil, nil, grant.Errorf(field, "%v", err)
			}
			found = a
		} else {
			for _, d := range g.Path {
				if p := filepath.Join(d, a); checkProgram(p) == nil {
					found = p
					break
				}
			}
			if found == "" {
				return nil, nil, grant.Errorf(field, "%q not found in path %s", a, strings.Join(g.Path, ":"))
			}
			byName[a] = found
		}
		// Tools write under the root (through this handle or the fs
		// handle): a program there could be replaced by anything.
		if real, err := filepath.EvalSymlinks(found); err == nil && within(realRoot, real) {
			return nil, nil, grant.Errorf(field, "%s is under root, where tools can replace it", found)
		}
		byPath[found] = true
	}
	return byName, byPath, nil
}

// within reports whether path p is dir or below it; both are clean and
// absolute.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// checkProgram returns an error unless p is an executable regular file.
func checkProgram(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// setUser decides which user children run as. As root: User (default
// nobody), with no supplementary groups and RLIMIT_NPROC, applied through
// ptrace or, where ptrace is not allowed, the exec helper (see
// start_linux.go). As anyone else: brain's own user, and no process limit,
// because RLIMIT_NPROC would count brain's own threads too.
func (e *Exec) setUser(root os.FileInfo) error {
	euid := os.Geteuid()
	if euid != 0 {
		if e.g.User != nil && *e.g.User != euid {
			return grant.Errorf("user", "%d: running children as another user needs root (brain runs as uid %d)", *e.g.User, euid)
		}
		e.logger.Warn("exec: max_processes is not enforced: brain does not run as root", logKeyUID, euid)
		return nil
	}
	uid := DefaultUser
	if e.g.User != nil {
		uid = *e.g.User
	}
	gid := uid
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if g, err := strconv.Atoi(u.Gid); err == nil {
			gid = g
		}
	}
	e.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if forceHelper.Load() {
		e.limit = limitHelper
	} else if err := e.probeTraced(); err == nil {
		e.limit = limitTrace
	} else if helperHooked.Load() {
		e.logger.Info("exec: ptrace is not allowed here; each command starts through the exec helper", logKeyErr, err)
		e.limit = limitHelper
	} else {
		return fmt.Errorf("exec handle: enforcing max_processes needs ptrace or the exec helper; starting %s traced as uid %d failed (%w), and proc.RunHelperIfRequested() was not called first thing in main", firstProgram(e.byPath), uid, err)
	}
	if !searchable(root, uint32(uid), uint32(gid)) {
		e.logger.Warn("exec: the exec user cannot enter root; every command will fail to start", logKeyRoot, e.rootPath, logKeyUID, uid)
	}
	return nil
}

// probeTraced checks that the ptrace path works here: directly, or, where
// root may not set another user's limit (no CAP_SYS_RESOURCE), through a
// limiter of the exec user, which it keeps (e.limiter) when that works.
func (e *Exec) probeTraced() error {
	program := firstProgram(e.byPath)
	err := probeTrace(program, e.cred, prlimitNPROC)
	if err == nil || !errors.Is(err, unix.EPERM) {
		return err
	}
	l, lerr := startLimiter(e.cred)
	if lerr != nil {
		return fmt.Errorf("%w (and no limiter: %v)", err, lerr)
	}
	if err := probeTrace(program, e.cred, l.limit); err != nil {
		l.close()
		return err
	}
	e.limiter = l
	e.logger.Debug("exec: root may not set other users' limits here; a limiter process of the exec user sets them")
	return nil
}

// searchable reports whether the mode bits of directory fi let uid/gid
// enter it. ACLs are ignored: this only feeds a warning.
func searchable(fi os.FileInfo, uid, gid uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == uid:
		return perm&0o100 != 0
	case st.Gid == gid:
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

// setLandlock builds the Landlock ruleset, or explains why there is none.
func (e *Exec) setLandlock() error {
	if e.g.Landlock == LandlockOff {
		return nil
	}
	abi := landlockABI()
	if abi == 0 {
		if e.g.Landlock == LandlockRequired {
			return grant.Errorf("landlock", "required, but this kernel has no Landlock (needs Linux 5.13+ with landlock in the lsm= list)")
		}
		e.logger.Warn("exec: Landlock is unavailable; children run without file-system confinement", logKeyLandlock, e.g.Landlock)
		return nil
	}
	rules := []pathRule{{path: e.rootPath, access: handledFS(abi)}}
	for _, d := range systemDirs {
		rules = append(rules, pathRule{path: d, access: llReadOnly, optional: true})
	}
	// The lookup directories and allowed programs the operator named, which
	// may live outside the system directories (/opt/tool/bin/x).
	for _, d := range e.g.Path {
		rules = append(rules, pathRule{path: d, access: llReadOnly, optional: true})
	}
	for p := range e.byPath {
		rules = append(rules, pathRule{path: p, access: llReadOnly})
	}
	if e.limit == limitHelper {
		// The helper is brain's own binary.
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("exec helper: %w", err)
		}
		rules = append(rules, pathRule{path: self, access: llReadOnly})
	}
	rules = append(rules, devFiles...)
	fd, err := newRuleset(abi, rules)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	e.ruleset, e.abi = fd, abi
	return nil
}

func (e *Exec) closeRuleset() {
	if e.ruleset >= 0 {
		syscall.Close(e.ruleset)
		e.ruleset = -1
	}
}

// Close releases the root directory and the Landlock ruleset. Commands
// already running finish; later calls to Run fail with unavailable.
func (e *Exec) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.closeRuleset()
	if e.limiter != nil {
		e.limiter.close()
	}
	return e.root.Close()
}

// Landlock reports the Landlock ABI version children are confined with,
// 0 when they are not (mode off, or best-effort on a kernel without it).
func (e *Exec) Landlock() int { return e.abi }

// Run runs cmd under the grants and returns what it did. See handle.Exec.
//
// The child runs with exactly the grant's environment plus the variables
// cmd may set, in cmd.Dir confined to the root, as the exec user, in its
// own process group; at the deadline or on cancellation the whole group is
// killed. When the program exits, whatever is left of its group is killed
// too, so no background child outlives the call. On timeout and
// cancellation the returned Result holds what was captured so far.
func (e *Exec) Run(ctx context.Context, cmd handle.Command) (handle.Result, error) {
	if err := handle.FromContext(ctx, handle.KindExec, opRun); err != nil {
		return handle.Result{}, err
	}
	b, err := clamp(cmd, e.g)
	if err != nil {
		return handle.Result{}, err
	}
	path, err := e.program(cmd.Program)
	if err != nil {
		return handle.Result{}, err
	}
	argv := make([]string, 0, 1+len(cmd.Args))
	argv = append(argv, cmd.Program)
	for i, a := range cmd.Args {
		if strings.ContainsRune(a, 0) {
			return handle.Result{}, handle.Errorf(handle.KindExec, opRun, protocol.CodeInvalidArgument, "argument %d contains NUL", i)
		}
		argv = append(argv, a)
	}
	env, err := e.environ(cmd.Env)
	if err != nil {
		return handle.Result{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	started := time.Now()
	p, pipes, err := e.start(cmd, path, argv, env, b)
	if err != nil {
		return handle.Result{}, err
	}
	defer pipes.close()

	var streams sync.WaitGroup
	var stdout, stderr capture
	streams.Go(func() { stdout = drain(pipes.stdout, b.MaxOutputBytes) })
	streams.Go(func() { stderr = drain(pipes.stderr, b.MaxOutputBytes) })
	if pipes.stdin != nil {
		streams.Go(func() {
			// An error here means the child stopped reading, which is its
			// business: it sees the short input.
			_, _ = pipes.stdin.Write(cmd.Stdin)
			_ = pipes.stdin.Close()
		})
	}

	// The killer kills the group at the deadline or on cancellation. It
	// never runs after the leader is reaped: we reap only once it is done,
	// so the group id cannot have been reused by then.
	exited := make(chan struct{})
	var stopped *handle.CapabilityError
	var killer sync.WaitGroup
	killer.Go(func() {
		select {
		case <-ctx.Done():
			killGroup(p.Pid)
			stopped = handle.FromContext(ctx, handle.KindExec, opRun)
		case <-exited:
		}
	})
	waitExited(p.Pid)
	close(exited)
	killer.Wait()
	// The leader has exited but is not reaped: kill what is left of its
	// group (background children) while the group id is still its own.
	killGroup(p.Pid)
	state, werr := p.Wait()
	res := handle.Result{ExitCode: -1, Duration: time.Since(started)}
	if werr == nil {
		res.ExitCode = state.ExitCode()
	}

	ioDone := make(chan struct{})
	go func() { streams.Wait(); close(ioDone) }()
	t := time.NewTimer(drainDelay)
	select {
	case <-ioDone:
	case <-t.C:
		// Someone outside the group still holds a pipe: stop reading.
		pipes.close()
		<-ioDone
	}
	t.Stop()
	res.Stdout, res.Stderr = stdout.data, stderr.data
	res.Truncated = stdout.truncated || stderr.truncated
	if stopped != nil {
		return res, stopped
	}
	if werr != nil {
		return res, &handle.CapabilityError{Handle: handle.KindExec, Op: opRun, Code: protocol.CodeInternal, Message: "waiting for the program failed", Err: werr}
	}
	return res, nil
}

// program returns the absolute path cmd.Program names, or denied.
func (e *Exec) program(name string) (string, error) {
	if name == "" {
		return "", handle.Errorf(handle.KindExec, opRun, protocol.CodeInvalidArgument, "no program given")
	}
	if strings.ContainsRune(name, '/') {
		if filepath.IsAbs(name) && e.byPath[filepath.Clean(name)] {
			return filepath.Clean(name), nil
		}
	} else if p, ok := e.byName[name]; ok {
		return p, nil
	}
	return "", handle.Errorf(handle.KindExec, opRun, protocol.CodeDenied, "program %q is not on the allow-list", name)
}

// environ returns the child's environment: the grant's, plus the
// variables of req, each of which must be allowed.
func (e *Exec) environ(req map[string]string) ([]string, error) {
	if len(req) == 0 {
		return e.baseEnv, nil
	}
	for k, v := range req {
		if isLoaderVar(k) {
			return nil, handle.Errorf(handle.KindExec, opRun, protocol.CodeDenied, "%s is a dynamic-loader variable; it is never allowed", k)
		}
		if !e.allowEnv[k] {
			return nil, handle.Errorf(handle.KindExec, opRun, protocol.CodeDenied, "environment variable %q is not allowed", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, handle.Errorf(handle.KindExec, opRun, protocol.CodeInvalidArgument, "environment variable %q contains NUL", k)
		}
	}
	merged := make(map[string]string, len(e.g.Env)+len(req))
	for k, v := range e.g.Env {
		merged[k] = v
	}
	for k, v := range req {
		merged[k] = v
	}
	env := make([]string, 0, len(merged))
	for k, v := range merged {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}

// openDir opens the working directory dir (relative to the root) through
// os.Root, so that "..", absolute paths and symbolic links cannot leave
// the root.
func (e *Exec) openDir(dir string) (*os.File, error) {
	if dir == "" {
		dir = "."
	}
	if filepath.IsAbs(dir) || !filepath.IsLocal(dir) {
		return nil, handle.Errorf(handle.KindExec, opRun, protocol.CodePathEscape, "working directory %q is outside the root", dir)
	}
	f, err := e.root.Open(dir)
	if err != nil {
		ce := &handle.CapabilityError{Handle: handle.KindExec, Op: opRun, Err: err}
		var pe *fs.PathError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			ce.Code, ce.Message = protocol.CodeNotFound, fmt.Sprintf("working directory %q does not exist", dir)
		case errors.Is(err, syscall.ENOTDIR):
			ce.Code, ce.Message = protocol.CodeInvalidArgument, fmt.Sprintf("working directory %q is not a directory", dir)
		case errors.Is(err, fs.ErrPermission):
			ce.Code, ce.Message = protocol.CodeDenied, fmt.Sprintf("working directory %q is not accessible", dir)
		// os.Root does not export its escape error; its text is pinned by
		// TestAttackDirEscape.
		case errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent", errors.Is(err, syscall.ELOOP):
			ce.Code, ce.Message = protocol.CodePathEscape, fmt.Sprintf("working directory %q is outside the root", dir)
		default:
			ce.Code, ce.Message = protocol.CodeInternal, fmt.Sprintf("cannot open working directory %q", dir)
		}
		return nil, ce
	}
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		f.Close()
		return nil, handle.Errorf(handle.KindExec, opRun, protocol.CodeInvalidArgument, "working directory %q is not a directory", dir)
	}
	return f, nil
}

// pipes are the parent's ends of the child's standard streams.
type pipes struct {
	stdin          *os.File // nil when there is no input
	stdout, stderr *os.File
	once           sync.Once
}

// close closes the parent's ends; it unblocks pending reads and writes.
func (p *pipes) close() {
	p.once.Do(func() {
		for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
			if f != nil {
				f.Close()
			}
		}
	})
}

// start opens the working directory and the pipes and starts the child.
func (e *Exec) start(cmd handle.Command, path string, argv, env []string, b Bounds) (*os.Process, *pipes, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, nil, handle.Errorf(handle.KindExec, opRun, protocol.CodeUnavailable, "the exec handle is closed")
	}
	dir, err := e.openDir(cmd.Dir)
	if err != nil {
		return nil, nil, err
	}
	defer dir.Close()

	var child [3]*os.File // the child's ends, closed here once it has them
	defer func() {
		for _, f := range child {
			if f != nil {
				f.Close()
			}
		}
	}()
	ps := &pipes{}
	fail := func(err error) (*os.Process, *pipes, error) {
		ps.close()
		return nil, nil, &handle.CapabilityError{Handle: handle.KindExec, Op: opRun, Code: protocol.CodeInternal, Message: "could not set up the program's input and output", Err: err}
	}
	if len(cmd.Stdin) > 0 {
		if child[0], ps.stdin, err = os.Pipe(); err != nil {
			return fail(err)
		}
	} else if child[0], err = os.Open(os.DevNull); err != nil {
		return fail(err)
	}
	if ps.stdout, child[1], err = os.Pipe(); err != nil {
		return fail(err)
	}
	if ps.stderr, child[2], err = os.Pipe(); err != nil {
		return fail(err)
	}

	// The child enters its working directory through our descriptor, not
	// by path: what os.Root resolved is what it gets, even if a symbolic
	// link is swapped in meanwhile. The magic link also spares the exec
	// user from needing search permission on the root's ancestors.
	attr := &os.ProcAttr{
		Dir:   "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())),
		Env:   env,
		Files: child[:],
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	switch e.limit {
	case limitTrace:
		// The child alone becomes the exec user and enters the namespaces;
		// it stops after exec for its process limit (start_linux.go).
		attr.Sys.Ptrace, attr.Sys.Credential, attr.Sys.Cloneflags = true, e.cred, e.clone
	case limitHelper:
		attr.Sys.Credential, attr.Sys.Cloneflags = e.cred, e.clone
		path, argv = "/proc/self/exe", helperArgv(b.MaxProcesses, path, argv)
	default:
		attr.Sys.Cloneflags = e.clone
	}
	p, err := e.startConfined(path, argv, attr, b.MaxProcesses)
	if err != nil {
		ps.close()
		return nil, nil, startError(err)
	}
	return p, ps, nil
}

// startError maps a failed start to a CapabilityError whose message names
// no host path.
func startError(err error) *handle.CapabilityError {
	ce := &handle.CapabilityError{Handle: handle.KindExec, Op: opRun, Err: err}
	switch {
	case errors.Is(err, syscall.EAGAIN):
		ce.Code, ce.Message = protocol.CodeUnavailable, "the program could not be started: a process limit was reached"
	case errors.Is(err, fs.ErrPermission):
		ce.Code, ce.Message = protocol.CodeDenied, "the program or the working directory is not accessible to the exec user"
	case errors.Is(err, fs.ErrNotExist):
		ce.Code, ce.Message = protocol.CodeNotFound, "the program no longer exists"
	default:
		ce.Code, ce.Message = protocol.CodeInternal, "the program could not be started"
	}
	return ce
}

// killGroup kills process group pgid. ESRCH (nothing left) is fine.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
