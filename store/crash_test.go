package store_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/brainrt/brain/store"
)

// The crash test re-executes the test binary with these set: the child
// opens the store in crashDirEnv, appends crashAckedEnv events, prints
// "ready", and keeps appending until it is killed.
const (
	crashDirEnv   = "BRAIN_STORE_CRASH_DIR"
	crashAckedEnv = "BRAIN_STORE_CRASH_ACKED"
	crashSession  = "crash"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}

// crashChild is the process the crash test kills.
func crashChild(dir string) int {
	n, err := strconv.Atoi(os.Getenv(crashAckedEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, &store.Options{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	j, err := st.Journal(crashSession)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if err := j.Append(ev(seq, "child")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	fmt.Println("ready")
	// Mid-stream: keep writing (up to a bound) until the parent's SIGKILL.
	for seq := uint64(n) + 1; seq <= uint64(n)+100_000; seq++ {
		if err := j.Append(ev(seq, "child")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	select {}
}

// TestSIGKILL kills a process that is appending: every event it had
// appended before saying so is in the store, the log has no gap or torn
// event, and a new journal continues it.
func TestSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	const acked = 500
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashAckedEnv+"="+strconv.Itoa(acked))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		lines <- sc.Text()
	}()
	select {
	case line := <-lines:
		if line != "ready" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q; stderr:\n%s", line, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child not ready after 60 s; stderr:\n%s", stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("child ended with %v, want killed by a signal; stderr:\n%s", err, stderr.String())
	}

	st := open(t, dir, nil)
	got := load(t, st, crashSession)
	if len(got) < acked {
		t.Fatalf("store holds %d events, the child had %d acknowledged", len(got), acked)
	}
	checkContiguous(t, got, 1)
	t.Logf("%d events acknowledged before ready, %d stored when killed", acked, len(got))
	next := uint64(len(got)) + 1
	appendAll(t, journal(t, st, crashSession), ev(next, "parent"))
	if after := load(t, st, crashSession); len(after) != len(got)+1 || writer(after[len(after)-1]) != fmt.Sprintf("parent.%d", next) {
		t.Fatalf("after one more append the store holds %d events", len(after))
	}
}
