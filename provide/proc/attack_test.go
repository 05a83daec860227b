//go:build linux

package proc_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/proc"
)

// One test per attack a tool might try through the exec handle.

func TestAttackProgramNotAllowed(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"echo", "/usr/bin/printf"}})
	for _, program := range []string{
		"rm",             // not listed
		"/usr/bin/rm",    // not listed, by path
		"printf",         // listed by path only, not by name
		"./echo",         // relative paths are never looked up
		"bin/echo",       //
		"../../bin/echo", //
		"ECHO",           // names are exact
		"echo ",          //
		"sh",             // no shell unless listed
	} {
		t.Run(program, func(t *testing.T) {
			_, err := e.Run(context.Background(), handle.Command{Program: program, Args: []string{"x"}})
			wantCode(t, err, protocol.CodeDenied)
		})
	}
}

func TestAttackShellInjectionIsLiteral(t *testing.T) {
	root := newRoot(t)
	e := newExec(t, proc.Grants{Root: root, Allow: []string{"echo"}})
	args := []string{"; rm -rf . ; touch pwned", "$(touch pwned)", "`touch pwned`", "&& touch pwned", "| tee pwned", "> pwned", "$HOME", "*"}
	res := mustRun(t, e, handle.Command{Program: "echo", Args: args})
	if want := strings.Join(args, " ") + "\n"; string(res.Stdout) != want {
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
	if _, err := os.Stat(filepath.Join(root, "pwned")); !os.IsNotExist(err) {
		t.Fatalf("an argument was interpreted: stat pwned: %v", err)
	}
}

func TestAttackSleepPastDeadline(t *testing.T) {
	tests := []struct {
		name  string
		grant time.Duration
		ask   time.Duration
	}{
		{"grant timeout", 300 * time.Millisecond, 0},
		{"command asks for less", time.Minute, 300 * time.Millisecond},
		{"command cannot ask for more", 300 * time.Millisecond, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec(t, proc.Grants{Allow: []string{"sleep"}, Timeout: tt.grant})
			start := time.Now()
			_, err := e.Run(context.Background(), handle.Command{Program: "sleep", Args: []string{"30"}, Timeout: tt.ask})
			wantCode(t, err, protocol.CodeTimeout)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Run returned after %v", d)
			}
		})
	}
}

func TestAttackCallerDeadline(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"sleep"}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := e.Run(ctx, handle.Command{Program: "sleep", Args: []string{"30"}})
	wantCode(t, err, protocol.CodeTimeout)
}

func TestAttackCancelled(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"sleep"}})
	ctx, cancel := context.WithCancel(context.Background())
	// Whether the cancel lands before or after the start, the code is the
	// same; the timer only makes it likely to land mid-run.
	stop := time.AfterFunc(200*time.Millisecond, cancel)
	defer stop.Stop()
	start := time.Now()
	_, err := e.Run(ctx, handle.Command{Program: "sleep", Args: []string{"30"}})
	wantCode(t, err, protocol.CodeCancelled)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run returned after %v", d)
	}
	// Already cancelled: nothing starts.
	_, err = e.Run(ctx, handle.Command{Program: "sleep", Args: []string{"30"}})
	wantCode(t, err, protocol.CodeCancelled)
}

func TestAttackGrandchildOutlivesParent(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"sh"}, Timeout: 10 * time.Second})
	start := time.Now()
	// sh exits at once; its background sleep holds stdout open and would
	// keep a naive Wait (and itself) alive for 100 s.
	res := mustRun(t, e, handle.Command{Program: "sh", Args: []string{"-c", "sleep 100.101 & echo started"}})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run returned after %v", d)
	}
	if string(res.Stdout) != "started\n" {
		t.Fatalf("stdout = %q", res.Stdout)
	}
	waitGone(t, "sleep 100.101")
}

func TestAttackGrandchildAtDeadline(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"sh"}, Timeout: 500 * time.Millisecond})
	// The leader outlives the deadline too.
	_, err := e.Run(context.Background(), handle.Command{Program: "sh", Args: []string{"-c", "sleep 100.102 & sleep 100.102; wait"}})
	wantCode(t, err, protocol.CodeTimeout)
	waitGone(t, "100.102")
}

func TestAttackSetsidEscape(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("without root there is no PID namespace, and a child that calls setsid leaves the process group (documented)")
	}
	e := newExec(t, proc.Grants{Allow: []string{"sh"}, Timeout: 10 * time.Second})
	start := time.Now()
	// setsid leaves the process group, so a group kill misses it; the PID
	// namespace does not let it go.
	res := mustRun(t, e, handle.Command{Program: "sh", Args: []string{"-c", "setsid sleep 100.103 & echo started"}})
	if string(res.Stdout) != "started\n" {
		t.Fatalf("stdout = %q", res.Stdout)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run returned after %v", d)
	}
	waitGone(t, "sleep 100.103")
}

func TestAttackOutputFlood(t *testing.T) {
	const max = 64 << 10
	e := newExec(t, proc.Grants{Allow: []string{"head", "sh", "yes"}, MaxOutputBytes: max, Timeout: 20 * time.Second})
	tests := []struct {
		name       string
		cmd        handle.Command
		stdout     int
		stderr     int
		truncated  bool
		wantPrefix string
	}{
		{"stdout", handle.Command{Program: "head", Args: []string{"-c", "50000000", "/dev/zero"}}, max, 0, true, ""},
		{"stderr", handle.Command{Program: "sh", Args: []string{"-c", "head -c 50000000 /dev/zero >&2"}}, 0, max, true, ""},
		{"both", handle.Command{Program: "sh", Args: []string{"-c", "head -c 50000000 /dev/zero >&2 & head -c 50000000 /dev/zero; wait"}}, max, max, true, ""},
		{"command asks for less", handle.Command{Program: "head", Args: []string{"-c", "50000000", "/dev/zero"}, MaxOutput: 10}, 10, 0, true, ""},
		{"exactly the cap", handle.Command{Program: "head", Args: []string{"-c", strconv.Itoa(max), "/dev/zero"}}, max, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustRun(t, e, tt.cmd)
			if len(res.Stdout) != tt.stdout || len(res.Stderr) != tt.stderr || res.Truncated != tt.truncated {
				t.Fatalf("stdout %d, stderr %d, truncated %v; want %d, %d, %v", len(res.Stdout), len(res.Stderr), res.Truncated, tt.stdout, tt.stderr, tt.truncated)
			}
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: the child was blocked or killed", res.ExitCode)
			}
		})
	}
	t.Run("endless", func(t *testing.T) {
		start := time.Now()
		res, err := e.Run(context.Background(), handle.Command{Program: "yes", Timeout: 500 * time.Millisecond})
		wantCode(t, err, protocol.CodeTimeout)
		if len(res.Stdout) != max || !res.Truncated || !strings.HasPrefix(string(res.Stdout), "y\ny\n") {
			t.Fatalf("stdout %d bytes, truncated %v", len(res.Stdout), res.Truncated)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Run returned after %v", d)
		}
	})
}

func TestAttackLDPreloadDenied(t *testing.T) {
	root := newRoot(t)
	e := newExec(t, proc.Grants{Root: root, Allow: []string{"echo"}, AllowEnv: []string{"GREETING"}})
	for _, name := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GLIBC_TUNABLES", "GCONV_PATH", "NOT_ALLOWED", "PATH"} {
		t.Run(name, func(t *testing.T) {
			_, err := e.Run(context.Background(), handle.Command{Program: "echo", Env: map[string]string{name: filepath.Join(root, "evil.so")}})
			wantCode(t, err, protocol.CodeDenied)
		})
	}
	// Listing one in the grant is refused before any command runs.
	_, err := proc.New(proc.Grants{Root: root, Allow: []string{"echo"}, AllowEnv: []string{"LD_PRELOAD"}}, nil)
	wantField(t, err, "allow_env[0]")
}

func TestAttackParentSecretNotVisible(t *testing.T) {
	t.Setenv("BRAIN_TEST_SECRET", "hunter2")
	e := newExec(t, proc.Grants{Allow: []string{"env", "sh"}})
	res := mustRun(t, e, handle.Command{Program: "env"})
	if strings.Contains(string(res.Stdout), "hunter2") || strings.Contains(string(res.Stdout), "BRAIN_TEST_SECRET") {
		t.Fatalf("the parent's secret leaked: %q", res.Stdout)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "PATH=/usr/local/bin:/usr/bin:/bin" {
		t.Fatalf("env = %q, want only PATH", got)
	}
	// Nor through /proc/<parent>/environ, which the exec user may not read.
	res, _ = e.Run(context.Background(), handle.Command{Program: "sh", Args: []string{"-c", "cat /proc/" + strconv.Itoa(os.Getpid()) + "/environ"}})
	if strings.Contains(string(res.Stdout), "hunter2") {
		t.Fatalf("the parent's secret leaked through /proc: %q", res.Stdout)
	}
}

func TestAttackForkBomb(t *testing.T) {
	forEachLimitMode(t, func(t *testing.T, mode string) {
		const limit = 12
		// The bomb runs as a uid of this test process's own: the kernel
		// counts RLIMIT_NPROC per user across the system, and as nobody it
		// shared its 12 with every program other tests run as nobody — a
		// second test run beside this one, its own fork bomb included, left
		// the bomb no fork at all (its sh exited at once, no timeout).
		uid := bombUID()
		// Its markers too: a bomb of another test run is not this one's.
		bomb, sleep := fmt.Sprintf("bomb_%d", os.Getpid()), fmt.Sprintf("sleep 60.%d", os.Getpid())
		root := t.TempDir()
		if err := os.Chown(root, uid, uid); err != nil {
			t.Fatal(err)
		}
		e := newExec(t, proc.Grants{Root: root, User: &uid, Allow: []string{"sh"}, MaxProcesses: limit, Timeout: 2 * time.Second, MaxOutputBytes: 4096})
		wantMode(t, e, mode)

		// Watch the bomb's process count while it runs: the processes of
		// its user in the process groups of the bomb's processes (zombies
		// included).
		done := make(chan struct{})
		peak := make(chan int, 1)
		go func() {
			max := 0
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for range 2000 { // at most 10 s
				if n := processesInGroupsOf(uid, bomb, sleep); n > max {
					max = n
				}
				select {
				case <-done:
					peak <- max
					return
				case <-tick.C:
				}
			}
			peak <- max
		}()

		start := time.Now()
		// The bomb spreads in the background while the leader waits in
		// exec'd sleep, so the call runs until the deadline.
		res, err := e.Run(context.Background(), handle.Command{Program: "sh", Args: []string{"-c", bomb + "() { " + bomb + " | " + bomb + " & }; " + bomb + " & exec " + sleep}})
		close(done)
		wantCode(t, err, protocol.CodeTimeout)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Run returned after %v", d)
		}
		if p := <-peak; p > limit {
			t.Fatalf("the bomb ran %d processes, limit %d", p, limit)
		} else if p < 2 {
			t.Fatalf("the watcher saw %d of the bomb's processes: it did not find the bomb", p)
		}
		if !strings.Contains(string(res.Stderr), "fork") {
			t.Fatalf("the bomb never hit the limit: stderr %q", res.Stderr)
		}
		waitGone(t, bomb)
		waitGone(t, sleep)
	})
}

// bombUID is a uid no other process uses: one past a million, plus this
// process's pid (at most 2^22 on Linux), so that two test runs at once
// differ too. It needs no passwd entry: the child runs with it, and its
// gid is the same number.
func bombUID() int { return 1_000_000 + os.Getpid() }

func TestAttackDirEscape(t *testing.T) {
	root := newRoot(t)
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"out": outside, "up": "..", "subup": "sub/../..", "etc": "/etc"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	e := newExec(t, proc.Grants{Root: root, Allow: []string{"pwd"}})
	for _, dir := range []string{"..", "../x", "/", "/etc", outside, "sub/../..", "out", "up", "subup", "etc", "sub/../out"} {
		t.Run(dir, func(t *testing.T) {
			res, err := e.Run(context.Background(), handle.Command{Program: "pwd", Dir: dir})
			wantCode(t, err, protocol.CodePathEscape)
			if len(res.Stdout) != 0 {
				t.Fatalf("ran anyway: %q", res.Stdout)
			}
		})
	}
}

func TestAttackNetworkIsolated(t *testing.T) {
	if os.Geteuid() != 0 {
		_, err := proc.New(proc.Grants{Root: newRoot(t), Allow: []string{"bash"}}, nil)
		wantField(t, err, "network")
		t.Skip("a network namespace needs root: checked that New refuses network: false")
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conns := make(chan struct{}, 8)
	go func() {
		for range 8 {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			conns <- struct{}{}
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	// bash's /dev/tcp connects without touching the file system.
	script := "echo hi > /dev/tcp/127.0.0.1/" + port

	t.Run("network false", func(t *testing.T) {
		e := newExec(t, proc.Grants{Allow: []string{"bash"}})
		res := mustRun(t, e, handle.Command{Program: "bash", Args: []string{"-c", script}})
		if res.ExitCode == 0 {
			t.Fatalf("connected to the host's loopback: %+v", res)
		}
		select {
		case <-conns:
			t.Fatal("the listener saw a connection")
		default:
		}
	})
	t.Run("network true", func(t *testing.T) {
		e := newExec(t, proc.Grants{Allow: []string{"bash"}, Network: true})
		res := mustRun(t, e, handle.Command{Program: "bash", Args: []string{"-c", script}})
		if res.ExitCode != 0 {
			t.Fatalf("could not connect: exit %d, stderr %q", res.ExitCode, res.Stderr)
		}
		select {
		case <-conns:
		case <-time.After(5 * time.Second):
			t.Fatal("the listener saw no connection")
		}
	})
}
