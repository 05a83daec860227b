package fsroot_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
)

// env is a temporary directory holding the handle's root and, beside it, an
// "outside" tree that no operation may reach.
type env struct {
	dir     string // parent of root and outside
	root    string
	outside string
	fs      *fsroot.FS
}

// secret is the content of outside/secret.
const secret = "top secret"

// newEnv creates dir/root (empty) and dir/outside (secret, sub/deep.txt),
// and opens an FS on root under g (g.Root is set here).
func newEnv(t *testing.T, g fsroot.Grants) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, root: filepath.Join(dir, "root"), outside: filepath.Join(dir, "outside")}
	mustMkdir(t, e.root)
	mustMkdir(t, filepath.Join(e.outside, "sub"))
	mustWrite(t, filepath.Join(e.outside, "secret"), secret)
	mustWrite(t, filepath.Join(e.outside, "sub", "deep.txt"), "deep")
	g.Root = e.root
	fsys, err := fsroot.New(g)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { fsys.Close() })
	e.fs = fsys
	return e
}

// in returns the host path of the slash-separated rel inside the root.
func (e *env) in(rel string) string { return filepath.Join(e.root, filepath.FromSlash(rel)) }

// wantCode fails unless err is a *handle.CapabilityError for the fs handle
// with code want and a message that does not name the host's root.
func (e *env) wantCode(t *testing.T, err error, want protocol.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want code %s", want)
	}
	var ce *handle.CapabilityError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %T %v, want *handle.CapabilityError", err, err)
	}
	if ce.Code != want {
		t.Fatalf("code = %s, want %s (err: %v)", ce.Code, want, err)
	}
	if ce.Handle != handle.KindFS || ce.Op == "" || ce.Message == "" {
		t.Errorf("handle/op/message = %q/%q/%q, want fs and non-empty", ce.Handle, ce.Op, ce.Message)
	}
	if strings.Contains(ce.Error(), e.root) {
		t.Errorf("error leaks the host root: %v", ce)
	}
}

// snapshot describes every entry under dir except the subtree skip: type,
// content of files, target of links. Symbolic links are not followed.
func snapshot(t *testing.T, dir, skip string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		b.WriteString(p + " " + d.Type().String())
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			b.WriteString(" -> " + target)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" = " + string(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return b.String()
}

// outsideSnapshot describes everything in e.dir except the root.
func (e *env) outsideSnapshot(t *testing.T) string { return snapshot(t, e.dir, e.root) }

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// mustNotExist fails if the host path p exists (a dangling link counts).
func mustNotExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists (lstat err %v), want it absent", p, err)
	}
}

// readHost returns the content of the host file p.
func readHost(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// collectWalk walks p and returns the visited paths.
func collectWalk(ctx context.Context, fsys handle.FS, p string) ([]string, error) {
	var got []string
	err := fsys.Walk(ctx, p, func(rel string, _ handle.FileInfo) error {
		got = append(got, rel)
		return nil
	})
	return got, err
}
