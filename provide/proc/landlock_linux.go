//go:build linux

package proc

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock through raw system calls rather than go-landlock: go-landlock's
// syscall package imports libcap/psx (to restrict every thread of a
// process), which this module does not require, and we restrict one thread
// only (see start_linux.go), which is the kernel's native semantic and
// needs three system calls.

// Access rights, by the Landlock ABI that introduced them.
const (
	llReadOnly = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// llV1 is every right of ABI 1: EXECUTE through MAKE_SYM.
	llV1 = 0x1fff
	// llFileRights are the rights that apply to a file (not a directory);
	// a rule on a file may grant only these.
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// landlockABI returns the kernel's Landlock ABI version, 0 when Landlock is
// missing or disabled.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// handledFS returns the file-system rights a ruleset handles at ABI abi:
// all it knows, so that anything not granted by a rule is denied.
func handledFS(abi int) uint64 {
	var r uint64
	if abi >= 1 {
		r |= llV1
	}
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 9 {
		r |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	return r
}

// handledScopes returns the IPC scopes restricted at ABI abi: the child may
// not signal processes outside its domain nor connect to abstract Unix
// sockets created outside it (a new network namespace already hides those,
// but network: true does not).
func handledScopes(abi int) uint64 {
	if abi >= 6 {
		return unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	return 0
}

// pathRule grants access beneath path (or to path, for a file).
type pathRule struct {
	path   string
	access uint64
	// optional rules are skipped when path does not exist (/lib64 on some
	// systems); others fail the ruleset.
	optional bool
}

// newRuleset creates a Landlock ruleset for ABI abi (at least 1) granting
// rules, and returns its close-on-exec descriptor. The ruleset is built
// once per Exec and enforced on each command's starting thread.
func newRuleset(abi int, rules []pathRule) (int, error) {
	handled := handledFS(abi)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled, Scoped: handledScopes(abi)}
	// The kernel accepts a larger struct than it knows as long as the
	// fields it does not know are zero, which they are for older ABIs.
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	for _, r := range rules {
		if err := addPathRule(int(fd), r, handled); err != nil {
			unix.Close(int(fd))
			return -1, err
		}
	}
	return int(fd), nil
}

func addPathRule(rulesetFD int, r pathRule, handled uint64) error {
	pfd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if r.optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("landlock rule %s: %w", r.path, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("landlock rule %s: %w", r.path, err)
	}
	access := r.access & handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFileRights
	}
	if access == 0 {
		return nil
	}
	pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock rule %s: landlock_add_rule: %w", r.path, errno)
	}
	return nil
}

// restrictThread sets no_new_privs on the calling OS thread and, when
// rulesetFD >= 0, enforces the ruleset on it. Both are per-thread and
// inherited by processes the thread starts; the caller must hold the
// thread (runtime.LockOSThread) and never release it, so that the runtime
// ends the thread instead of reusing it.
func restrictThread(rulesetFD int, abi int) error {
	// no_new_privs: setuid and file-capability binaries do not gain
	// privileges in the child, and Landlock requires it.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if rulesetFD < 0 {
		return nil
	}
	var flags uintptr
	if abi >= 7 {
		// Audit denials by the program we exec, not only by this thread.
		flags |= unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFD), flags, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
