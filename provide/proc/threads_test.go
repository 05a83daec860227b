//go:build linux

package proc_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/proc"
)

// threadsProgramEnv makes the test binary run threadsProgram instead of
// the tests: a program that, from main, makes an Exec (its probes run at
// once) and runs a command, as the red team's did, then reports the
// credentials of every thread.
const threadsProgramEnv = "BRAIN_PROC_THREADS_PROGRAM"

// threadCreds returns "tid uid gid" of every thread of this process whose
// real, effective, saved or filesystem uid or gid is not brain's own.
func threadCreds() ([]string, error) {
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		return nil, err
	}
	var odd []string
	for _, p := range tasks {
		f, err := os.Open(p)
		if err != nil {
			continue // the thread ended meanwhile
		}
		var uid, gid string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
				uid = strings.Join(strings.Fields(v), ",")
			}
			if v, ok := strings.CutPrefix(sc.Text(), "Gid:"); ok {
				gid = strings.Join(strings.Fields(v), ",")
			}
		}
		f.Close()
		want := fmt.Sprintf("%d,%d,%d,%d", os.Getuid(), os.Getuid(), os.Getuid(), os.Getuid())
		wantG := fmt.Sprintf("%d,%d,%d,%d", os.Getgid(), os.Getgid(), os.Getgid(), os.Getgid())
		if uid != want || gid != wantG {
			odd = append(odd, fmt.Sprintf("%s uid %s gid %s", filepath.Base(filepath.Dir(p)), uid, gid))
		}
	}
	return odd, nil
}

// settledCreds is threadCreds once no thread of another user is left,
// or after a bound: a throwaway thread ends a moment after its goroutine
// returns (the runtime's own exit path), so the test waits for that, and
// for nothing else: one that never ends is what it looks for.
func settledCreds() ([]string, error) {
	deadline := time.Now().Add(2 * time.Second) // thread exit takes microseconds; seconds only on a loaded machine
	for {
		odd, err := threadCreds()
		if err != nil || len(odd) == 0 || time.Now().After(deadline) {
			return odd, err
		}
		time.Sleep(10 * time.Millisecond) // polling /proc, not synchronising
	}
}

func threadsProgram() int {
	root, err := os.MkdirTemp("", "brain-threads-")
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer os.RemoveAll(root)
	_ = os.Chown(root, proc.DefaultUser, proc.DefaultUser)
	e, err := proc.New(proc.Grants{Root: root, Allow: []string{"echo"}}, nil)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer e.Close()
	for range 3 {
		if _, err := e.Run(context.Background(), handle.Command{Program: "echo", Args: []string{"hi"}}); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	odd, err := settledCreds()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	for _, o := range odd {
		fmt.Println("thread:", o)
	}
	fmt.Println("done")
	return 0
}

// TestNoThreadRunsAsTheExecUser: as root, the exec user's credentials are
// the children's only. After proc.New (its probes) and exec calls — made
// from main, where the Go runtime parks a locked main thread instead of
// ending it — every thread of the process is still root: a thread left as
// uid 65534 let that user signal brain and change its limits (5 of 5 runs
// before). Run in a process of its own so that its main thread is free,
// and in this one too.
func TestNoThreadRunsAsTheExecUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the exec user is another user only when brain runs as root")
	}
	for run := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), threadsProgramEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "done") {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
		if strings.Contains(string(out), "thread:") {
			t.Fatalf("run %d: threads of another user after proc.New and exec calls:\n%s", run, out)
		}
	}
	e := newExec(t, proc.Grants{Allow: []string{"echo"}})
	for range 5 {
		if _, err := e.Run(context.Background(), handle.Command{Program: "echo", Args: []string{"hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	odd, err := settledCreds()
	if err != nil || len(odd) > 0 {
		t.Fatalf("threads of another user in the test process: %v %v", odd, err)
	}
}
