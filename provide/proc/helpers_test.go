//go:build linux

package proc_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/grant"
	"github.com/brainrt/brain/provide/proc"
)

// execUID is the uid children run as: nobody when the tests run as root.
func execUID() int {
	if os.Geteuid() == 0 {
		return proc.DefaultUser
	}
	return os.Geteuid()
}

// newRoot returns a fresh root directory the exec user owns, so that
// children (nobody, when the tests run as root) can enter and write it.
func newRoot(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chown(d, execUID(), execUID()); err != nil {
		t.Fatal(err)
	}
	return d
}

// newExec returns an Exec for g, with a fresh root when g has none, closed
// at the end of the test.
func newExec(t testing.TB, g proc.Grants) *proc.Exec {
	t.Helper()
	if g.Root == "" {
		g.Root = newRoot(t)
	}
	if os.Geteuid() != 0 {
		// Only root can give the child a network namespace of its own
		// (TestAttackNetworkIsolated checks it); elsewhere New would refuse
		// the default.
		g.Network = true
	}
	e, err := proc.New(g, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// mustRun runs cmd and fails the test on error.
func mustRun(t testing.TB, e *proc.Exec, cmd handle.Command) handle.Result {
	t.Helper()
	res, err := e.Run(context.Background(), cmd)
	if err != nil {
		t.Fatalf("Run(%s %q): %v (cause: %v; stderr %q)", cmd.Program, cmd.Args, err, errors.Unwrap(err), res.Stderr)
	}
	return res
}

// wantCode fails unless err is a *handle.CapabilityError with code.
func wantCode(t testing.TB, err error, code protocol.Code) {
	t.Helper()
	var ce *handle.CapabilityError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want a CapabilityError with code %s", err, err, code)
	}
	if ce.Code != code {
		t.Fatalf("code = %s (%v), want %s", ce.Code, err, code)
	}
}

// wantField fails unless err is a *grant.FieldError for field.
func wantField(t testing.TB, err error, field string) {
	t.Helper()
	var fe *grant.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want a grant.FieldError for %q", err, err, field)
	}
	if fe.Field != field {
		t.Fatalf("field = %q (%v), want %q", fe.Field, err, field)
	}
}

// running returns the live processes whose command line (arguments
// joined by spaces) contains marker. Commands run in PID namespaces of
// their own, so the pids a child prints mean nothing here: tests find their
// processes by a marker in the arguments instead.
func running(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		// A zombie's command line is empty: it is dead, waiting for init
		// to reap it.
		if err != nil || len(b) == 0 {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGone waits, at most 5 s, until no process matches marker.
func waitGone(t testing.TB, marker string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for range 500 {
		pids := running(marker)
		if len(pids) == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("processes %v (%q) still alive", pids, marker)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("processes (%q) still alive", marker)
}

// processesInGroupsOf counts the processes of uid (zombies included) in the
// process groups of the live processes whose command line contains one of
// markers.
func processesInGroupsOf(uid int, markers ...string) int {
	groups := map[string]bool{}
	for _, m := range markers {
		for _, pid := range running(m) {
			if g := pgrpOf(strconv.Itoa(pid)); g != "" {
				groups[g] = true
			}
		}
	}
	if len(groups) == 0 {
		return 0
	}
	ents, _ := os.ReadDir("/proc")
	n := 0
	want := "Uid:\t" + strconv.Itoa(uid) + "\t"
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil || !groups[pgrpOf(ent.Name())] {
			continue
		}
		if b, err := os.ReadFile("/proc/" + ent.Name() + "/status"); err == nil && strings.Contains(string(b), want) {
			n++
		}
	}
	return n
}

// pgrpOf returns the process group of pid, from /proc/<pid>/stat (the
// fifth field, after the command name in parentheses), or "".
func pgrpOf(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp ...
	if len(f) < 3 {
		return ""
	}
	return f[2]
}

// forEachLimitMode runs f once for each way the process limit can be
// applied as root: ptrace (preferred) and the exec helper (the fallback).
// f gets the mode newExec should end up in.
func forEachLimitMode(t *testing.T, f func(t *testing.T, mode string)) {
	if os.Geteuid() != 0 {
		t.Skip("max_processes is enforced only when brain runs as root")
	}
	for _, mode := range []string{"ptrace", "helper"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "helper" {
				proc.ForceHelper(t)
			}
			f(t, mode)
		})
	}
}

// wantMode fails unless e applies the process limit the way mode says.
func wantMode(t testing.TB, e *proc.Exec, mode string) {
	t.Helper()
	if got := proc.LimitMode(e); got != mode {
		t.Fatalf("limit mode = %s, want %s", got, mode)
	}
}
