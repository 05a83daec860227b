//go:build linux

package proc_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/grant"
	"github.com/brainrt/brain/provide/proc"
)

// outsideFile returns a file outside any exec root that every user may
// read, in a directory every user may write: only Landlock stands between a
// child and it.
func outsideFile(t *testing.T) (dir, file string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "brain-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("outside secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// landlockAvailable reports whether this kernel has Landlock, as New in
// required mode sees it, and checks how required mode fails without it.
func landlockAvailable(t *testing.T) bool {
	t.Helper()
	e, err := proc.New(proc.Grants{Root: newRoot(t), Allow: []string{"cat"}, Landlock: proc.LandlockRequired, Network: os.Geteuid() != 0}, nil)
	if err != nil {
		var fe *grant.FieldError
		if !errors.As(err, &fe) || fe.Field != "landlock" {
			t.Fatalf("New(required) = %v, want a landlock field error or success", err)
		}
		return false
	}
	defer e.Close()
	if e.Landlock() == 0 {
		t.Fatal("required mode succeeded without Landlock")
	}
	return true
}

func TestAttackLandlockReadOutsideRoot(t *testing.T) {
	_, secret := outsideFile(t)
	cmd := handle.Command{Program: "cat", Args: []string{secret}}

	// Control: with Landlock off, file permissions allow the read.
	off := newExec(t, proc.Grants{Allow: []string{"cat"}, Landlock: proc.LandlockOff})
	if res := mustRun(t, off, cmd); string(res.Stdout) != "outside secret\n" {
		t.Fatalf("control read failed: %+v", res)
	}

	if !landlockAvailable(t) {
		// best-effort on a kernel without Landlock runs unconfined.
		e := newExec(t, proc.Grants{Allow: []string{"cat"}})
		if e.Landlock() != 0 {
			t.Fatal("Landlock reported without kernel support")
		}
		t.Skip("this kernel has no Landlock: checked best-effort and required modes only")
	}
	for _, mode := range []string{proc.LandlockBestEffort, proc.LandlockRequired} {
		t.Run(mode, func(t *testing.T) {
			e := newExec(t, proc.Grants{Allow: []string{"cat"}, Landlock: mode})
			res := mustRun(t, e, cmd)
			if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "secret") {
				t.Fatalf("read outside the root: %+v", res)
			}
			if !strings.Contains(string(res.Stderr), "Permission denied") {
				t.Fatalf("stderr = %q", res.Stderr)
			}
		})
	}
}

func TestAttackLandlockWriteOutsideRoot(t *testing.T) {
	if !landlockAvailable(t) {
		t.Skip("this kernel has no Landlock")
	}
	dir, secret := outsideFile(t)
	root := newRoot(t)
	e := newExec(t, proc.Grants{Root: root, Allow: []string{"sh"}})
	tests := []struct {
		name, script string
	}{
		{"create", "echo pwned > " + filepath.Join(dir, "new")},
		{"overwrite", "echo pwned > " + secret},
		{"append", "echo pwned >> " + secret},
		{"remove", "rm -f " + secret},
		{"tmp", "echo pwned > /tmp/brain-landlock-test-" + filepath.Base(dir)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustRun(t, e, handle.Command{Program: "sh", Args: []string{"-c", tt.script}})
			if res.ExitCode == 0 {
				t.Fatalf("succeeded: %+v", res)
			}
		})
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "outside secret\n" {
		t.Fatalf("secret = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Fatalf("created outside the root: %v", err)
	}
	if _, err := os.Stat("/tmp/brain-landlock-test-" + filepath.Base(dir)); !os.IsNotExist(err) {
		t.Fatalf("created in /tmp: %v", err)
	}
}

func TestLandlockAllowsRootAndSystem(t *testing.T) {
	root := newRoot(t)
	e := newExec(t, proc.Grants{Root: root, Allow: []string{"sh"}})
	if landlockAvailable(t) && e.Landlock() == 0 {
		t.Fatal("best-effort did not use the kernel's Landlock")
	}
	// Everything a build-like command needs: write, rename and remove in
	// the root, read system files, the null device, run other programs.
	script := `set -e
mkdir -p d/e
echo data > d/e/f
mv d/e/f d/g
cat d/g
ls d
rm -r d
head -c 3 /etc/passwd
echo
echo quiet > /dev/null
head -c 4 /dev/zero | od -An -tx1`
	res := mustRun(t, e, handle.Command{Program: "sh", Args: []string{"-c", script}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if want := "data\ne\ng\nroo\n 00 00 00 00\n"; string(res.Stdout) != want {
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
}
