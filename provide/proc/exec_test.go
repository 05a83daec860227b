//go:build linux

package proc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/proc"
)

func TestRunEcho(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"echo"}})
	res := mustRun(t, e, handle.Command{Program: "echo", Args: []string{"hello", "world"}})
	if string(res.Stdout) != "hello world\n" || len(res.Stderr) != 0 || res.ExitCode != 0 || res.Truncated {
		t.Fatalf("result = %+v", res)
	}
	if res.Duration <= 0 {
		t.Fatalf("duration = %v", res.Duration)
	}
}

func TestRunExitCode(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"sh"}})
	res := mustRun(t, e, handle.Command{Program: "sh", Args: []string{"-c", "echo oops >&2; exit 3"}})
	if res.ExitCode != 3 || string(res.Stderr) != "oops\n" {
		t.Fatalf("result = %+v", res)
	}
}

func TestRunStdin(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"cat", "true"}})
	tests := []struct {
		name    string
		program string
		stdin   []byte
		want    string
	}{
		{"echoed", "cat", []byte("line 1\nline 2\n"), "line 1\nline 2\n"},
		{"larger than a pipe", "cat", []byte(strings.Repeat("x", 1<<20)), strings.Repeat("x", 1<<20)},
		{"none", "cat", nil, ""},
		{"unread", "true", []byte(strings.Repeat("y", 1<<20)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustRun(t, e, handle.Command{Program: tt.program, Stdin: tt.stdin})
			if string(res.Stdout) != tt.want || res.ExitCode != 0 {
				t.Fatalf("stdout %d bytes, exit %d, stderr %q", len(res.Stdout), res.ExitCode, res.Stderr)
			}
		})
	}
}

func TestRunDir(t *testing.T) {
	root := newRoot(t)
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// A symbolic link that stays inside the root is fine.
	if err := os.Symlink("a/b", filepath.Join(root, "inside")); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, proc.Grants{Root: root, Allow: []string{"pwd"}})
	tests := []struct{ dir, want string }{
		{"", root},
		{".", root},
		{"a", filepath.Join(root, "a")},
		{"a/b", sub},
		{"a/../a/b", sub},
		{"inside", sub},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			res := mustRun(t, e, handle.Command{Program: "pwd", Args: []string{"-P"}, Dir: tt.dir})
			if got := strings.TrimSpace(string(res.Stdout)); got != tt.want {
				t.Fatalf("pwd = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunDirErrors(t *testing.T) {
	root := newRoot(t)
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, proc.Grants{Root: root, Allow: []string{"pwd"}})
	tests := []struct {
		dir  string
		code protocol.Code
	}{
		{"missing", protocol.CodeNotFound},
		{"file", protocol.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			_, err := e.Run(context.Background(), handle.Command{Program: "pwd", Dir: tt.dir})
			wantCode(t, err, tt.code)
		})
	}
}

func TestRunEnv(t *testing.T) {
	e := newExec(t, proc.Grants{
		Allow:    []string{"env"},
		Env:      map[string]string{"LANG": "C.UTF-8"},
		AllowEnv: []string{"GREETING", "LANG"},
	})
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"grant only", nil, []string{"LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin"}},
		{"allowed variable", map[string]string{"GREETING": "hi there"}, []string{"GREETING=hi there", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin"}},
		{"allowed override", map[string]string{"LANG": "C"}, []string{"LANG=C", "PATH=/usr/local/bin:/usr/bin:/bin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustRun(t, e, handle.Command{Program: "env", Env: tt.env})
			got := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("env = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunProgramForms(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"echo", "/usr/bin/printf"}})
	tests := []struct {
		name, program string
		args          []string
		want          string
	}{
		{"name", "echo", []string{"a"}, "a\n"},
		{"resolved path of a name", "/usr/bin/echo", []string{"b"}, "b\n"},
		{"absolute entry", "/usr/bin/printf", []string{"%s-%s", "c", "d"}, "c-d"},
		{"absolute entry, unclean", "/usr//bin/printf", []string{"e"}, "e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustRun(t, e, handle.Command{Program: tt.program, Args: tt.args})
			if string(res.Stdout) != tt.want {
				t.Fatalf("stdout = %q, want %q", res.Stdout, tt.want)
			}
		})
	}
}

func TestRunInvalidArguments(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"echo"}, AllowEnv: []string{"A"}})
	tests := []struct {
		name string
		cmd  handle.Command
	}{
		{"no program", handle.Command{}},
		{"NUL in argument", handle.Command{Program: "echo", Args: []string{"a\x00b"}}},
		{"NUL in variable", handle.Command{Program: "echo", Env: map[string]string{"A": "a\x00b"}}},
		{"negative timeout", handle.Command{Program: "echo", Timeout: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Run(context.Background(), tt.cmd)
			wantCode(t, err, protocol.CodeInvalidArgument)
		})
	}
}

func TestRunAsExecUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("children switch users only when brain runs as root")
	}
	tests := []struct {
		name string
		user *int
		want string
	}{
		{"default nobody", nil, "65534 65534 65534"},
		{"chosen user", intp(4242), "4242 4242 4242"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.Chmod(root, 0o755); err != nil {
				t.Fatal(err)
			}
			e := newExec(t, proc.Grants{Root: root, Allow: []string{"sh"}, User: tt.user})
			res := mustRun(t, e, handle.Command{Program: "sh", Args: []string{"-c", "echo $(id -u) $(id -g) $(id -G)"}})
			if got := strings.TrimSpace(string(res.Stdout)); got != tt.want {
				t.Fatalf("uid gid groups = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunNoNewPrivs(t *testing.T) {
	// Landlock off: /proc is not readable under it.
	e := newExec(t, proc.Grants{Allow: []string{"grep"}, Landlock: proc.LandlockOff})
	res := mustRun(t, e, handle.Command{Program: "grep", Args: []string{"NoNewPrivs", "/proc/self/status"}})
	if got := strings.Join(strings.Fields(string(res.Stdout)), " "); got != "NoNewPrivs: 1" {
		t.Fatalf("status = %q", res.Stdout)
	}
}

func TestRunConcurrent(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"echo"}})
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			want := fmt.Sprintf("call %d", i)
			res, err := e.Run(context.Background(), handle.Command{Program: "echo", Args: []string{want}})
			if err != nil {
				errs <- err
				return
			}
			if string(res.Stdout) != want+"\n" {
				errs <- fmt.Errorf("call %d: stdout %q", i, res.Stdout)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRunAfterClose(t *testing.T) {
	e, err := proc.New(proc.Grants{Root: newRoot(t), Allow: []string{"echo"}, Network: os.Geteuid() != 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = e.Run(context.Background(), handle.Command{Program: "echo"})
	wantCode(t, err, protocol.CodeUnavailable)
}

func TestRunArgv0(t *testing.T) {
	e := newExec(t, proc.Grants{Allow: []string{"sh", "/usr/bin/dash"}})
	for _, program := range []string{"sh", "/usr/bin/dash"} {
		t.Run(program, func(t *testing.T) {
			res := mustRun(t, e, handle.Command{Program: program, Args: []string{"-c", `echo "$0"`}})
			if got := strings.TrimSpace(string(res.Stdout)); got != program {
				t.Fatalf("$0 = %q, want %q", got, program)
			}
		})
	}
}

func TestRunProcessLimitApplied(t *testing.T) {
	forEachLimitMode(t, func(t *testing.T, mode string) {
		e := newExec(t, proc.Grants{Allow: []string{"bash"}, MaxProcesses: 7})
		wantMode(t, e, mode)
		// Soft and hard limits are both the grant's; the child cannot raise
		// them.
		res := mustRun(t, e, handle.Command{Program: "bash", Args: []string{"-c", "ulimit -Su; ulimit -Hu; ulimit -u 100 && echo raised"}})
		if string(res.Stdout) != "7\n7\n" || res.ExitCode == 0 {
			t.Fatalf("stdout %q, exit %d, stderr %q", res.Stdout, res.ExitCode, res.Stderr)
		}
	})
}

func TestRunLimitModesConfine(t *testing.T) {
	_, secret := outsideFile(t)
	forEachLimitMode(t, func(t *testing.T, mode string) {
		e := newExec(t, proc.Grants{Allow: []string{"sh"}})
		wantMode(t, e, mode)
		res := mustRun(t, e, handle.Command{Program: "sh", Args: []string{"-c", `echo "$0 $(id -u) $(id -G)"; cat ` + secret}})
		if string(res.Stdout) != "sh 65534 65534\n" {
			t.Fatalf("argv0, uid, groups = %q", res.Stdout)
		}
		if e.Landlock() > 0 && res.ExitCode == 0 {
			t.Fatal("read outside the root")
		}
		// /proc is outside Landlock's rules: look at no_new_privs without.
		off := newExec(t, proc.Grants{Allow: []string{"grep"}, Landlock: proc.LandlockOff})
		wantMode(t, off, mode)
		res = mustRun(t, off, handle.Command{Program: "grep", Args: []string{"NoNewPrivs", "/proc/self/status"}})
		if got := strings.Join(strings.Fields(string(res.Stdout)), " "); got != "NoNewPrivs: 1" {
			t.Fatalf("status = %q", res.Stdout)
		}
	})
}
