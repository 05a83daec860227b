// Package proc provides the exec handle: [Exec] runs allow-listed programs
// for a tool, under [Grants] the tool never sees.
//
//	e, err := proc.New(proc.Grants{
//		Root:  "/srv/work",
//		Allow: []string{"git", "go"},
//	}, nil)
//	if err != nil { … }
//	defer e.Close()
//	res, err := e.Run(ctx, handle.Command{Program: "git", Args: []string{"status"}})
//
// There is never a shell: a command is a program and its argv, and "$(…)"
// or "; rm -rf /" in an argument is just text. A program runs only if it is
// on the allow-list, by name (resolved in the grant's path once, at setup)
// or by absolute path; anything else is denied.
//
// # Confinement layers
//
// Each layer is independent; docs/handle-exec.md says what each one stops
// and what it does not.
//
//   - Environment: exactly the grant's env plus the variables the command
//     sets, each of which must be in allow_env. Nothing is inherited from
//     brain, so its secrets do not leak; dynamic-loader variables (LD_*,
//     GLIBC_TUNABLES, …) are refused even if listed.
//   - Working directory: resolved through os.Root under the grant's root
//     ("..", absolute paths and symbolic links out fail with path_escape)
//     and handed to the child as the descriptor os.Root opened.
//   - Process group: the child leads a new group. At the deadline or on
//     cancellation, and again as soon as the program exits, the whole group
//     is killed, so background children do not outlive the call. Output
//     past the cap is read and discarded so the child never blocks on it.
//   - User and process count: when brain runs as root, children run as an
//     unprivileged user (Grants.User, default 65534) with no supplementary
//     groups and RLIMIT_NPROC = max_processes. The kernel counts that limit
//     per uid: every process of that user, from concurrent calls or other
//     software, shares it, so give brain a user of its own. Not as root,
//     children run as brain's user and max_processes is not enforced.
//   - PID namespace (as root): each command is PID 1 of a namespace of its
//     own, so when the program exits the kernel kills whatever it left,
//     including processes that called setsid to leave the group.
//   - no_new_privs: setuid binaries do not gain privileges in the child.
//   - Landlock (default best-effort): the child may read and write under
//     the root, read and execute the system directories (/usr, /lib,
//     /lib64, /bin, /sbin, /etc), the lookup path and the allowed programs,
//     and use /dev/null, /dev/zero, /dev/full and /dev/urandom; nothing
//     else in the file system (no /tmp, /proc, /home).
//   - Network: without network: true the child runs in a new, empty network
//     namespace (only a loopback device, down).
//
// # How a child is started
//
// The namespaces, no_new_privs, Landlock and, as root, the exec user's
// credentials are all per-thread in Linux and inherited by a process from
// the thread that clones it. So each command is started from a throwaway
// OS thread that takes them on first; brain itself stays unconfined. The
// process limit is per process and must be set in the child before it
// runs: the thread starts the child traced, the kernel stops it right after
// exec, the thread (now the same user) sets its RLIMIT_NPROC and lets it
// go. Where ptrace is forbidden (Yama, seccomp), each command instead
// starts as brain's own binary in helper mode, which sets its own limit and
// execs the program; that costs a Go runtime start per call and needs one
// call first thing in main, and in TestMain of test binaries:
//
//	func main() {
//		proc.RunHelperIfRequested()
//		…
//	}
package proc
