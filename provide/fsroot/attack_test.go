//go:build unix

package fsroot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
)

// TestAttacks is the adversarial suite: one case per attack, each asserting
// the exact code, that the message does not name the host root, and that
// nothing outside the root changed.
func TestAttacks(t *testing.T) {
	// Common fixtures, each created by the cases that need them.
	outLink := func(t *testing.T, e *env) { mustSymlink(t, "../outside", e.in("out")) }
	file := func(t *testing.T, e *env) { mustWrite(t, e.in("f"), "inside") }
	hardLink := func(t *testing.T, e *env) {
		if err := os.Link(filepath.Join(e.outside, "secret"), e.in("hl")); err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(rel, want string) func(*testing.T, *env) {
		return func(t *testing.T, e *env) {
			if got := readHost(t, e.in(rel)); got != want {
				t.Errorf("%s = %q, want %q", rel, got, want)
			}
		}
	}
	absent := func(rel string) func(*testing.T, *env) {
		return func(t *testing.T, e *env) { mustNotExist(t, e.in(rel)) }
	}
	readOnly := fsroot.Grants{ReadOnly: true}
	small := fsroot.Grants{MaxFileBytes: 10, MaxEntries: 3}

	tests := []struct {
		name   string
		grants fsroot.Grants
		setup  func(t *testing.T, e *env)
		do     func(ctx context.Context, e *env) error
		want   protocol.Code
		check  func(t *testing.T, e *env) // state inside the root afterwards
	}{
		// Lexical escapes, refused before any system call.
		{name: "dotdot read", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "../outside/secret"); return err }},
		{name: "dotdot nested read", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) { mustMkdir(t, e.in("a")) },
			do: func(ctx context.Context, e *env) error {
				_, err := e.fs.ReadFile(ctx, "a/../../outside/secret")
				return err
			}},
		{name: "dotdot write", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "../escaped", []byte("x")) }},
		{name: "dotdot mkdir", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { return e.fs.MkdirAll(ctx, "a/../../newdir") }},
		{name: "dotdot stat", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.Stat(ctx, ".."); return err }},
		{name: "dotdot read dir", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadDir(ctx, "../outside"); return err }},
		{name: "dotdot walk", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { _, err := collectWalk(ctx, e.fs, ".."); return err }},
		{name: "dotdot glob", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.Glob(ctx, "../*/secret"); return err }},
		{name: "dotdot remove", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error { return e.fs.Remove(ctx, "../outside/secret") }},
		{name: "absolute read", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error {
				_, err := e.fs.ReadFile(ctx, filepath.Join(e.outside, "secret"))
				return err
			}},
		{name: "absolute write", want: protocol.CodePathEscape,
			do: func(ctx context.Context, e *env) error {
				return e.fs.WriteFile(ctx, filepath.Join(e.dir, "escaped"), []byte("x"))
			}},
		{name: "absolute path to inside the root", want: protocol.CodePathEscape,
			setup: file,
			do:    func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, e.in("f")); return err }},
		{name: "NUL byte", want: protocol.CodeInvalidArgument,
			setup: file,
			do: func(ctx context.Context, e *env) error {
				_, err := e.fs.ReadFile(ctx, "f\x00/../../outside/secret")
				return err
			}},
		{name: "empty path", want: protocol.CodeInvalidArgument,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, ""); return err }},

		// A symbolic link to outside, placed before the handle is used.
		{name: "symlink out pre-existing read", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "out/secret"); return err }},
		{name: "symlink out pre-existing write", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "out/new", []byte("x")) }},
		{name: "symlink out pre-existing mkdir", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { return e.fs.MkdirAll(ctx, "out/newdir") }},
		{name: "symlink out pre-existing stat", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.Stat(ctx, "out/secret"); return err }},
		{name: "symlink out pre-existing read dir", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadDir(ctx, "out"); return err }},
		{name: "symlink out pre-existing walk below", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { _, err := collectWalk(ctx, e.fs, "out/sub"); return err }},
		{name: "symlink out pre-existing glob below", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.Glob(ctx, "out/sub/*"); return err }},
		{name: "symlink out pre-existing remove", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { return e.fs.Remove(ctx, "out/secret") }},
		{name: "symlink to outside file write", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) { mustSymlink(t, "../outside/secret", e.in("s")) },
			do:    func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "s", []byte("pwned")) }},
		{name: "absolute symlink out", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) { mustSymlink(t, filepath.Join(e.outside, "secret"), e.in("abs")) },
			do:    func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "abs"); return err }},
		{name: "absolute symlink to inside the root", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) { file(t, e); mustSymlink(t, e.in("f"), e.in("abs")) },
			do:    func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "abs"); return err }},
		{name: "symlink out through a chain", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) {
				mustMkdir(t, e.in("a/b"))
				mustSymlink(t, "../..", e.in("a/b/up"))   // a/b/up -> root
				mustSymlink(t, "b/up/..", e.in("a/away")) // a/away -> root/.. = outside
			},
			do: func(ctx context.Context, e *env) error {
				_, err := e.fs.ReadFile(ctx, "a/away/outside/secret")
				return err
			}},
		{name: "symlink loop", want: protocol.CodeInvalidArgument,
			setup: func(t *testing.T, e *env) { mustSymlink(t, "loop", e.in("loop")) },
			do:    func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "loop"); return err }},

		// Symbolic links the tool tries to create.
		{name: "tool symlink relative out", want: protocol.CodePathEscape, check: absent("l"),
			do: func(ctx context.Context, e *env) error { return e.fs.Symlink(ctx, "../outside/secret", "l") }},
		{name: "tool symlink nested out", want: protocol.CodePathEscape, check: absent("a/l"),
			setup: func(t *testing.T, e *env) { mustMkdir(t, e.in("a")) },
			do:    func(ctx context.Context, e *env) error { return e.fs.Symlink(ctx, "a/../../../outside", "a/l") }},
		{name: "tool symlink absolute target", want: protocol.CodePathEscape, check: absent("l"),
			do: func(ctx context.Context, e *env) error {
				return e.fs.Symlink(ctx, filepath.Join(e.outside, "secret"), "l")
			}},
		{name: "tool symlink at a path through a link out", want: protocol.CodePathEscape, setup: outLink,
			do: func(ctx context.Context, e *env) error { return e.fs.Symlink(ctx, "x", "out/l") }},
		{
			// "self/../outside/secret" is lexically inside, but self is the
			// root itself, so the link really lands in the root pointing out.
			// The lexical check lets it through; reading it must not.
			name: "tool symlink through a symlinked parent then read", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) {
				ctx := context.Background()
				if err := e.fs.Symlink(ctx, ".", "self"); err != nil {
					t.Fatal(err)
				}
				if err := e.fs.Symlink(ctx, "../outside/secret", "self/l"); err != nil {
					t.Fatal(err)
				}
			},
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "l"); return err },
		},
		// An exec'd program is not bound by os.Root: simulate one planting
		// links with os.Symlink directly.
		{name: "program symlink out read", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) {
				mustMkdir(t, e.in("a"))
				mustSymlink(t, "../../outside/secret", e.in("a/l"))
			},
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "a/l"); return err }},
		{name: "program symlink out write", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) {
				mustMkdir(t, e.in("a"))
				mustSymlink(t, "../../outside/secret", e.in("a/l"))
			},
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "a/l", []byte("pwned")) }},
		{name: "program dangling symlink out create", want: protocol.CodePathEscape,
			setup: func(t *testing.T, e *env) { mustSymlink(t, "../outside/created", e.in("d")) },
			do:    func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "d", []byte("x")) }},

		// Rename and link out, or in from outside.
		{name: "rename out dotdot", want: protocol.CodePathEscape, setup: file, check: unchanged("f", "inside"),
			do: func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "f", "../outside/f") }},
		{name: "rename out through a link", want: protocol.CodePathEscape, check: unchanged("f", "inside"),
			setup: func(t *testing.T, e *env) { file(t, e); outLink(t, e) },
			do:    func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "f", "out/f") }},
		{name: "rename out absolute", want: protocol.CodePathEscape, setup: file, check: unchanged("f", "inside"),
			do: func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "f", filepath.Join(e.outside, "f")) }},
		{name: "rename in from outside", want: protocol.CodePathEscape, check: absent("stolen"),
			do: func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "../outside/secret", "stolen") }},
		{name: "rename in through a link", want: protocol.CodePathEscape, setup: outLink, check: absent("stolen"),
			do: func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "out/secret", "stolen") }},
		{name: "link out dotdot", want: protocol.CodePathEscape, setup: file,
			do: func(ctx context.Context, e *env) error { return e.fs.Link(ctx, "f", "../outside/f") }},
		{name: "link in from outside", want: protocol.CodePathEscape, check: absent("stolen"),
			do: func(ctx context.Context, e *env) error { return e.fs.Link(ctx, "../outside/secret", "stolen") }},
		{name: "link in absolute", want: protocol.CodePathEscape, check: absent("stolen"),
			do: func(ctx context.Context, e *env) error {
				return e.fs.Link(ctx, filepath.Join(e.outside, "secret"), "stolen")
			}},
		{name: "link in through a link", want: protocol.CodeDenied, setup: outLink, check: absent("stolen"),
			do: func(ctx context.Context, e *env) error { return e.fs.Link(ctx, "out/secret", "stolen") }},
		{name: "link inside", want: protocol.CodeDenied, setup: file, check: absent("g"),
			do: func(ctx context.Context, e *env) error { return e.fs.Link(ctx, "f", "g") }},

		// A hard link to an outside file, placed by the host or a program.
		{name: "hard link from outside read", want: protocol.CodeDenied, setup: hardLink,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "hl"); return err }},
		{name: "hard link from outside write", want: protocol.CodeDenied, setup: hardLink,
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "hl", []byte("pwned")) }},
		{name: "hard link from outside read through symlink", want: protocol.CodeDenied,
			setup: func(t *testing.T, e *env) { hardLink(t, e); mustSymlink(t, "hl", e.in("s")) },
			do:    func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "s"); return err }},

		// Read-only grants.
		{name: "read-only write", grants: readOnly, want: protocol.CodeDenied, setup: file, check: unchanged("f", "inside"),
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "f", []byte("changed")) }},
		{name: "read-only create", grants: readOnly, want: protocol.CodeDenied, check: absent("new"),
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "new", []byte("x")) }},
		{name: "read-only mkdir", grants: readOnly, want: protocol.CodeDenied, check: absent("d"),
			do: func(ctx context.Context, e *env) error { return e.fs.MkdirAll(ctx, "d") }},
		{name: "read-only remove", grants: readOnly, want: protocol.CodeDenied, setup: file, check: unchanged("f", "inside"),
			do: func(ctx context.Context, e *env) error { return e.fs.Remove(ctx, "f") }},
		{name: "read-only rename", grants: readOnly, want: protocol.CodeDenied, setup: file, check: unchanged("f", "inside"),
			do: func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "f", "g") }},
		{name: "read-only symlink", grants: readOnly, want: protocol.CodeDenied, setup: file, check: absent("l"),
			do: func(ctx context.Context, e *env) error { return e.fs.Symlink(ctx, "f", "l") }},
		{name: "read-only link", grants: readOnly, want: protocol.CodeDenied, setup: file, check: absent("g"),
			do: func(ctx context.Context, e *env) error { return e.fs.Link(ctx, "f", "g") }},

		// Size and listing limits.
		{name: "oversize write new", grants: small, want: protocol.CodeTooLarge, check: absent("big"),
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "big", []byte("0123456789a")) }},
		{name: "oversize write existing", grants: small, want: protocol.CodeTooLarge, setup: file, check: unchanged("f", "inside"),
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "f", []byte("0123456789a")) }},
		{name: "oversize read", grants: small, want: protocol.CodeTooLarge,
			setup: func(t *testing.T, e *env) { mustWrite(t, e.in("big"), "0123456789a") },
			do:    func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "big"); return err }},
		{name: "too many entries read dir", grants: small, want: protocol.CodeTooLarge, setup: manyFiles(4),
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadDir(ctx, "."); return err }},
		{name: "too many entries walk", grants: small, want: protocol.CodeTooLarge, setup: manyFiles(4),
			do: func(ctx context.Context, e *env) error { _, err := collectWalk(ctx, e.fs, "."); return err }},
		{name: "too many entries glob", grants: small, want: protocol.CodeTooLarge, setup: manyFiles(4),
			do: func(ctx context.Context, e *env) error { _, err := e.fs.Glob(ctx, "*"); return err }},

		// Files that are not regular: opening them must not block.
		{name: "FIFO read", want: protocol.CodeInvalidArgument, setup: fifo,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "fifo"); return err }},
		{name: "FIFO write", want: protocol.CodeInvalidArgument, setup: fifo,
			do: func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "fifo", []byte("x")) }},
		{name: "FIFO read dir", want: protocol.CodeInvalidArgument, setup: fifo,
			do: func(ctx context.Context, e *env) error { _, err := e.fs.ReadDir(ctx, "fifo"); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.grants)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			before := e.outsideSnapshot(t)
			err := tc.do(context.Background(), e)
			e.wantCode(t, err, tc.want)
			if after := e.outsideSnapshot(t); after != before {
				t.Errorf("outside the root changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

// manyFiles returns a setup creating n files in the root.
func manyFiles(n int) func(*testing.T, *env) {
	return func(t *testing.T, e *env) {
		for i := range n {
			mustWrite(t, e.in(string(rune('a'+i))), "x")
		}
	}
}

// fifo creates a FIFO named "fifo" in the root, as a program could.
func fifo(t *testing.T, e *env) {
	if err := syscall.Mkfifo(e.in("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWalkSwap swaps a directory for a symbolic link from inside the walk
// callback, after the directory was listed and before the walk opens it, and
// checks the walk neither lists nor opens anything through the link.
func TestWalkSwap(t *testing.T) {
	tests := []struct {
		name  string
		at    string // the swap happens when the walk reports this path
		swap  func(t *testing.T, e *env)
		want  protocol.Code
		never []string // paths the walk must not report
	}{
		{
			name: "directory to absolute link out", at: "a", want: protocol.CodePathEscape,
			swap:  func(t *testing.T, e *env) { replaceWithLink(t, e.in("a"), e.outside) },
			never: []string{"a/secret", "a/sub", "a/sub/deep.txt"},
		},
		{
			name: "directory to relative link out", at: "a", want: protocol.CodePathEscape,
			swap:  func(t *testing.T, e *env) { replaceWithLink(t, e.in("a"), "../outside") },
			never: []string{"a/secret", "a/sub", "a/sub/deep.txt"},
		},
		{
			name: "nested directory to relative link out", at: "a/b", want: protocol.CodePathEscape,
			swap:  func(t *testing.T, e *env) { replaceWithLink(t, e.in("a/b"), "../../outside") },
			never: []string{"a/b/secret", "a/b/sub", "a/b/sub/deep.txt"},
		},
		{
			name: "parent of the next directory to link out", at: "a/b", want: protocol.CodePathEscape,
			swap: func(t *testing.T, e *env) {
				// Keep a's content inside the root, put a link out in its place.
				if err := os.Rename(e.in("a"), e.in("moved")); err != nil {
					t.Fatal(err)
				}
				mustSymlink(t, "../outside", e.in("a"))
				mustMkdir(t, filepath.Join(e.outside, "b"))
				mustWrite(t, filepath.Join(e.outside, "b", "planted"), "outside")
			},
			never: []string{"a/b/planted"},
		},
		{
			name: "directory to link inside", at: "a", want: protocol.CodeConflict,
			swap:  func(t *testing.T, e *env) { replaceWithLink(t, e.in("a"), "c") },
			never: []string{"a/c.txt"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fsroot.Grants{})
			mustWrite(t, e.in("a/b/x.txt"), "x")
			mustWrite(t, e.in("c/c.txt"), "c")
			before := snapshot(t, e.outside, "")
			var got []string
			swapped := false
			err := e.fs.Walk(context.Background(), ".", func(rel string, _ handle.FileInfo) error {
				got = append(got, rel)
				if rel == tc.at && !swapped {
					swapped = true
					tc.swap(t, e)
					before = snapshot(t, e.outside, "") // the swap itself may plant files outside
				}
				return nil
			})
			if !swapped {
				t.Fatalf("walk never reported %q; got %v", tc.at, got)
			}
			e.wantCode(t, err, tc.want)
			for _, p := range got {
				for _, bad := range tc.never {
					if p == bad {
						t.Errorf("walk reported %q through the swapped link; got %v", p, got)
					}
				}
				if strings.Contains(p, "secret") || strings.Contains(p, "deep") {
					t.Errorf("walk reported an outside entry %q", p)
				}
			}
			if after := snapshot(t, e.outside, ""); after != before {
				t.Errorf("outside changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// replaceWithLink removes the directory p and puts a symbolic link to
// target in its place.
func replaceWithLink(t *testing.T, p, target string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, target, p)
}
