package fsroot_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/provide/grant"
)

func TestReadWriteFile(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(t *testing.T, e *env)
		path  string
		data  string
	}{
		{name: "new file", path: "a.txt", data: "hello"},
		{name: "empty file", path: "empty", data: ""},
		{name: "nested", setup: func(t *testing.T, e *env) { mustMkdir(t, e.in("a/b")) }, path: "a/b/c.txt", data: "deep"},
		{name: "truncates a longer file", setup: func(t *testing.T, e *env) { mustWrite(t, e.in("f"), "a much longer content") }, path: "f", data: "short"},
		{name: "unclean path", setup: func(t *testing.T, e *env) { mustMkdir(t, e.in("a")) }, path: "./a//x/../f.txt", data: "clean"},
		{name: "through a symlink inside", setup: func(t *testing.T, e *env) {
			mustWrite(t, e.in("real/f"), "old")
			mustSymlink(t, "real", e.in("link"))
		}, path: "link/f", data: "via link"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fsroot.Grants{})
			if tc.setup != nil {
				tc.setup(t, e)
			}
			if err := e.fs.WriteFile(ctx, tc.path, []byte(tc.data)); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			got, err := e.fs.ReadFile(ctx, tc.path)
			if err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if string(got) != tc.data {
				t.Errorf("ReadFile = %q, want %q", got, tc.data)
			}
		})
	}
}

func TestReadWriteFileAtLimit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{MaxFileBytes: 10})
	data := []byte("0123456789")
	if err := e.fs.WriteFile(ctx, "f", data); err != nil {
		t.Fatalf("WriteFile of exactly the limit: %v", err)
	}
	got, err := e.fs.ReadFile(ctx, "f")
	if err != nil || string(got) != string(data) {
		t.Fatalf("ReadFile = %q, %v; want %q", got, err, data)
	}
}

func TestReadFileLarge(t *testing.T) {
	// Larger than any single read, to exercise the read loop.
	e := newEnv(t, fsroot.Grants{})
	want := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	mustWrite(t, e.in("big"), want)
	got, err := e.fs.ReadFile(context.Background(), "big")
	if err != nil || string(got) != want {
		t.Fatalf("ReadFile: len %d, err %v; want len %d", len(got), err, len(want))
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(ctx context.Context, e *env) error
		want protocol.Code
	}{
		{"read missing", func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "missing"); return err }, protocol.CodeNotFound},
		{"read directory", func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "dir"); return err }, protocol.CodeInvalidArgument},
		{"read below a file", func(ctx context.Context, e *env) error { _, err := e.fs.ReadFile(ctx, "file/x"); return err }, protocol.CodeInvalidArgument},
		{"write missing parent", func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "nodir/f", nil) }, protocol.CodeNotFound},
		{"write directory", func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, "dir", nil) }, protocol.CodeInvalidArgument},
		{"write root", func(ctx context.Context, e *env) error { return e.fs.WriteFile(ctx, ".", nil) }, protocol.CodeInvalidArgument},
		{"stat missing", func(ctx context.Context, e *env) error { _, err := e.fs.Stat(ctx, "missing"); return err }, protocol.CodeNotFound},
		{"read dir missing", func(ctx context.Context, e *env) error { _, err := e.fs.ReadDir(ctx, "missing"); return err }, protocol.CodeNotFound},
		{"read dir of a file", func(ctx context.Context, e *env) error { _, err := e.fs.ReadDir(ctx, "file"); return err }, protocol.CodeInvalidArgument},
		{"mkdir over a file", func(ctx context.Context, e *env) error { return e.fs.MkdirAll(ctx, "file/sub") }, protocol.CodeInvalidArgument},
		{"remove missing", func(ctx context.Context, e *env) error { return e.fs.Remove(ctx, "missing") }, protocol.CodeNotFound},
		{"remove non-empty directory", func(ctx context.Context, e *env) error { return e.fs.Remove(ctx, "dir") }, protocol.CodeInvalidArgument},
		{"remove root", func(ctx context.Context, e *env) error { return e.fs.Remove(ctx, ".") }, protocol.CodeInvalidArgument},
		{"rename missing", func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "missing", "x") }, protocol.CodeNotFound},
		{"rename root", func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, ".", "x") }, protocol.CodeInvalidArgument},
		{"rename onto root", func(ctx context.Context, e *env) error { return e.fs.Rename(ctx, "file", "a/..") }, protocol.CodeInvalidArgument},
		{"symlink existing", func(ctx context.Context, e *env) error { return e.fs.Symlink(ctx, "dir", "file") }, protocol.CodeInvalidArgument},
		{"symlink empty target", func(ctx context.Context, e *env) error { return e.fs.Symlink(ctx, "", "l") }, protocol.CodeInvalidArgument},
		{"symlink NUL target", func(ctx context.Context, e *env) error { return e.fs.Symlink(ctx, "a\x00", "l") }, protocol.CodeInvalidArgument},
		{"walk missing", func(ctx context.Context, e *env) error { _, err := collectWalk(ctx, e.fs, "missing"); return err }, protocol.CodeNotFound},
		{"glob bad pattern", func(ctx context.Context, e *env) error { _, err := e.fs.Glob(ctx, "dir/[a-"); return err }, protocol.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fsroot.Grants{})
			mustWrite(t, e.in("dir/inner"), "x")
			mustWrite(t, e.in("file"), "x")
			e.wantCode(t, tc.do(context.Background(), e), tc.want)
		})
	}
}

func TestStat(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("dir/f.txt"), "12345")
	mustSymlink(t, "dir", e.in("link"))
	mustSymlink(t, "../outside", e.in("out")) // described, not followed
	tests := []struct {
		path  string
		name  string
		size  int64
		isDir bool
		typ   fs.FileMode
	}{
		{path: ".", name: ".", isDir: true, typ: fs.ModeDir},
		{path: "dir", name: "dir", isDir: true, typ: fs.ModeDir},
		{path: "dir/f.txt", name: "f.txt", size: 5},
		{path: "link", name: "link", typ: fs.ModeSymlink},
		{path: "link/f.txt", name: "f.txt", size: 5},
		{path: "out", name: "out", typ: fs.ModeSymlink},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			info, err := e.fs.Stat(ctx, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != tc.name || info.Size != tc.size || info.IsDir != tc.isDir || info.Mode.Type() != tc.typ {
				t.Errorf("Stat = %+v, want name %q size %d dir %v type %v", info, tc.name, tc.size, tc.isDir, tc.typ)
			}
			if info.ModTime.IsZero() {
				t.Error("ModTime is zero")
			}
		})
	}
}

func TestReadDir(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{MaxEntries: 4}) // the root holds exactly 4
	mustWrite(t, e.in("b.txt"), "bb")
	mustWrite(t, e.in("a/inner"), "x")
	mustSymlink(t, "../outside", e.in("c")) // listed, not followed
	mustMkdir(t, e.in("empty"))
	mustSymlink(t, "../a", e.in("a/self"))

	root := []string{"a:d:0", "b.txt:-:2", "c:L:0", "empty:d:0"}
	tests := []struct {
		path string
		want []string // name:type:size
	}{
		{".", root},
		{"a", []string{"inner:-:1", "self:L:0"}},
		{"empty", []string{}},
		{"c/..", root},                                // cleaned to "."
		{"a/self", []string{"inner:-:1", "self:L:0"}}, // through a link inside
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			infos, err := e.fs.ReadDir(ctx, tc.path)
			if err != nil {
				t.Fatalf("ReadDir: %v", err)
			}
			got := []string{}
			for _, in := range infos {
				got = append(got, fmt.Sprintf("%s:%s:%d", in.Name, in.Mode.Type().String()[:1], in.Size))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ReadDir(%q) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}

func TestMkdirAll(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{})
	for _, p := range []string{"a/b/c", "a/b/c", "a/b", "."} {
		if err := e.fs.MkdirAll(ctx, p); err != nil {
			t.Fatalf("MkdirAll(%q): %v", p, err)
		}
	}
	if fi, err := os.Stat(e.in("a/b/c")); err != nil || !fi.IsDir() {
		t.Fatalf("a/b/c: %v, %v", fi, err)
	}
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("f"), "x")
	mustMkdir(t, e.in("empty"))
	mustSymlink(t, "../outside/secret", e.in("out"))
	for _, p := range []string{"f", "empty", "out"} {
		if err := e.fs.Remove(ctx, p); err != nil {
			t.Fatalf("Remove(%q): %v", p, err)
		}
		mustNotExist(t, e.in(p))
	}
	// Removing the link removed the link, not what it pointed at.
	if got := readHost(t, filepath.Join(e.outside, "secret")); got != secret {
		t.Errorf("outside/secret = %q", got)
	}
}

func TestRename(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("f"), "content")
	mustWrite(t, e.in("d/inner"), "inner")
	mustMkdir(t, e.in("dest"))
	steps := [][2]string{{"f", "g"}, {"g", "dest/g"}, {"d", "dest/d"}}
	for _, s := range steps {
		if err := e.fs.Rename(ctx, s[0], s[1]); err != nil {
			t.Fatalf("Rename(%q, %q): %v", s[0], s[1], err)
		}
	}
	if got := readHost(t, e.in("dest/g")); got != "content" {
		t.Errorf("dest/g = %q", got)
	}
	if got := readHost(t, e.in("dest/d/inner")); got != "inner" {
		t.Errorf("dest/d/inner = %q", got)
	}
	mustNotExist(t, e.in("f"))
	mustNotExist(t, e.in("d"))
}

func TestSymlink(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("a/f"), "via link")
	mustMkdir(t, e.in("b"))
	tests := []struct{ target, link, read string }{
		{"a/f", "l1", "l1"},
		{"../a/f", "b/l2", "b/l2"},
		{"a", "l3", "l3/f"},
		{".", "self", "self/a/f"},
	}
	for _, tc := range tests {
		t.Run(tc.link, func(t *testing.T) {
			if err := e.fs.Symlink(ctx, tc.target, tc.link); err != nil {
				t.Fatalf("Symlink: %v", err)
			}
			if target, err := os.Readlink(e.in(tc.link)); err != nil || target != tc.target {
				t.Errorf("link target = %q, %v; want %q", target, err, tc.target)
			}
			got, err := e.fs.ReadFile(ctx, tc.read)
			if err != nil || string(got) != "via link" {
				t.Errorf("ReadFile(%q) = %q, %v", tc.read, got, err)
			}
		})
	}
}

func TestLinkRefused(t *testing.T) {
	// Link is refused by design (see FS.Link); the rule is part of the API.
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("f"), "x")
	e.wantCode(t, e.fs.Link(context.Background(), "f", "g"), protocol.CodeDenied)
	mustNotExist(t, e.in("g"))
}

func TestWalk(t *testing.T) {
	e := newEnv(t, fsroot.Grants{})
	for _, p := range []string{"a/x", "a/y/z", "a.b", "b", "c/d"} {
		mustWrite(t, e.in(p), p)
	}
	mustSymlink(t, "../outside", e.in("a/out"))
	mustSymlink(t, "c", e.in("toc"))
	mustMkdir(t, e.in("e"))

	walk := func(t *testing.T, start string, fn func(rel string, info handle.FileInfo) error) ([]string, error) {
		t.Helper()
		var got []string
		err := e.fs.Walk(context.Background(), start, func(rel string, info handle.FileInfo) error {
			got = append(got, rel+":"+info.Mode.Type().String()[:1])
			if fn != nil {
				return fn(rel, info)
			}
			return nil
		})
		return got, err
	}
	errStop := errors.New("stop")
	tests := []struct {
		name    string
		start   string
		fn      func(rel string, info handle.FileInfo) error
		want    []string
		wantErr error
	}{
		{name: "all", start: ".", want: []string{
			".:d", "a:d", "a/out:L", "a/x:-", "a/y:d", "a/y/z:-", "a.b:-", "b:-", "c:d", "c/d:-", "e:d", "toc:L",
		}},
		{name: "subdirectory", start: "a/y", want: []string{"a/y:d", "a/y/z:-"}},
		{name: "unclean start", start: "./a//y/", want: []string{"a/y:d", "a/y/z:-"}},
		{name: "file", start: "b", want: []string{"b:-"}},
		{name: "symlink start is not followed", start: "toc", want: []string{"toc:L"}},
		{name: "skip a directory", start: ".",
			fn: func(rel string, _ handle.FileInfo) error {
				if rel == "a" {
					return fs.SkipDir
				}
				return nil
			},
			want: []string{".:d", "a:d", "a.b:-", "b:-", "c:d", "c/d:-", "e:d", "toc:L"}},
		{name: "skip the rest of a directory from a file", start: ".",
			fn: func(rel string, _ handle.FileInfo) error {
				if rel == "a/x" {
					return fs.SkipDir
				}
				return nil
			},
			want: []string{".:d", "a:d", "a/out:L", "a/x:-", "a.b:-", "b:-", "c:d", "c/d:-", "e:d", "toc:L"}},
		{name: "skip all", start: ".",
			fn: func(rel string, _ handle.FileInfo) error {
				if rel == "a/y" {
					return fs.SkipAll
				}
				return nil
			},
			want: []string{".:d", "a:d", "a/out:L", "a/x:-", "a/y:d"}},
		{name: "callback error", start: ".",
			fn: func(rel string, _ handle.FileInfo) error {
				if rel == "b" {
					return errStop
				}
				return nil
			},
			want:    []string{".:d", "a:d", "a/out:L", "a/x:-", "a/y:d", "a/y/z:-", "a.b:-", "b:-"},
			wantErr: errStop},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := walk(t, tc.start, tc.fn)
			if err != tc.wantErr {
				t.Fatalf("Walk err = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Walk =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	e := newEnv(t, fsroot.Grants{})
	for _, p := range []string{"a.go", "b.txt", "cmd/main.go", "cmd/x/y/deep.go", "docs/a.md", "docs/b/c.md", "a/b.go"} {
		mustWrite(t, e.in(p), "x")
	}
	mustSymlink(t, "../outside", e.in("docs/out"))
	mustSymlink(t, "cmd", e.in("linkcmd"))
	tests := []struct {
		pattern string
		want    []string
	}{
		{"*.go", []string{"a.go"}},
		{"*", []string{"a", "a.go", "b.txt", "cmd", "docs", "linkcmd"}},
		{"**/*.go", []string{"a.go", "a/b.go", "cmd/main.go", "cmd/x/y/deep.go"}},
		{"cmd/**/*.go", []string{"cmd/main.go", "cmd/x/y/deep.go"}},
		{"cmd/**", []string{"cmd", "cmd/main.go", "cmd/x", "cmd/x/y", "cmd/x/y/deep.go"}},
		{"**/y/*", []string{"cmd/x/y/deep.go"}},
		{"docs/*", []string{"docs/a.md", "docs/b", "docs/out"}},
		{"docs/**/*.md", []string{"docs/a.md", "docs/b/c.md"}},
		{"[ab]*.*", []string{"a.go", "b.txt"}},
		{"?.go", []string{"a.go"}},
		{"cmd/main.go", []string{"cmd/main.go"}},
		{"./docs/../a.go", []string{"a.go"}},
		{"missing/*", nil},
		{"nothing*", nil},
		{"linkcmd/*", nil},  // links are not followed
		{"docs/out/*", nil}, // not even to look outside
		{"**/secret", nil},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			got, err := e.fs.Glob(context.Background(), tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Glob(%q) = %v, want %v", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestContext(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	calls := map[string]func(ctx context.Context, fsys *fsroot.FS) error{
		"ReadFile":  func(ctx context.Context, f *fsroot.FS) error { _, err := f.ReadFile(ctx, "f"); return err },
		"WriteFile": func(ctx context.Context, f *fsroot.FS) error { return f.WriteFile(ctx, "f", nil) },
		"ReadDir":   func(ctx context.Context, f *fsroot.FS) error { _, err := f.ReadDir(ctx, "."); return err },
		"Stat":      func(ctx context.Context, f *fsroot.FS) error { _, err := f.Stat(ctx, "f"); return err },
		"MkdirAll":  func(ctx context.Context, f *fsroot.FS) error { return f.MkdirAll(ctx, "d") },
		"Remove":    func(ctx context.Context, f *fsroot.FS) error { return f.Remove(ctx, "f") },
		"Rename":    func(ctx context.Context, f *fsroot.FS) error { return f.Rename(ctx, "f", "g") },
		"Symlink":   func(ctx context.Context, f *fsroot.FS) error { return f.Symlink(ctx, "f", "l") },
		"Link":      func(ctx context.Context, f *fsroot.FS) error { return f.Link(ctx, "f", "g") },
		"Walk":      func(ctx context.Context, f *fsroot.FS) error { _, err := collectWalk(ctx, f, "."); return err },
		"Glob":      func(ctx context.Context, f *fsroot.FS) error { _, err := f.Glob(ctx, "*"); return err },
	}
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("f"), "x")
	for name, call := range calls {
		t.Run(name+"/cancelled", func(t *testing.T) { e.wantCode(t, call(cancelled, e.fs), protocol.CodeCancelled) })
		t.Run(name+"/timeout", func(t *testing.T) { e.wantCode(t, call(expired, e.fs), protocol.CodeTimeout) })
	}
	if got := readHost(t, e.in("f")); got != "x" {
		t.Errorf("f = %q after cancelled calls", got)
	}
}

func TestWalkStopsWhenCancelled(t *testing.T) {
	e := newEnv(t, fsroot.Grants{})
	for i := range 10 {
		mustWrite(t, e.in(string(rune('a'+i))), "x")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	err := e.fs.Walk(ctx, ".", func(rel string, _ handle.FileInfo) error {
		got = append(got, rel)
		if rel == "c" {
			cancel()
		}
		return nil
	})
	e.wantCode(t, err, protocol.CodeCancelled)
	if want := []string{".", "a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("visited %v, want %v", got, want)
	}
}

func TestClosed(t *testing.T) {
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("f"), "x")
	if err := e.fs.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := e.fs.ReadFile(context.Background(), "f")
	e.wantCode(t, err, protocol.CodeUnavailable)
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	mustWrite(t, file, "x")
	tests := []struct {
		name      string
		grants    fsroot.Grants
		field     string
		notExists bool
	}{
		{name: "missing root", grants: fsroot.Grants{Root: filepath.Join(dir, "missing")}, field: "root", notExists: true},
		{name: "root is a file", grants: fsroot.Grants{Root: file}, field: "root"},
		{name: "invalid grants", grants: fsroot.Grants{Root: dir, MaxEntries: -1}, field: "max_entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, err := fsroot.New(tc.grants)
			if err == nil {
				fsys.Close()
				t.Fatal("New succeeded")
			}
			var fe *grant.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a *grant.FieldError for %q", err, tc.field)
			}
			if tc.notExists && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("err = %v, want errors.Is(err, fs.ErrNotExist)", err)
			}
		})
	}
}

func TestGrantsValidate(t *testing.T) {
	tests := []struct {
		name   string
		grants fsroot.Grants
		field  string // "" when valid
	}{
		{name: "minimal", grants: fsroot.Grants{Root: "/srv"}},
		{name: "full", grants: fsroot.Grants{Root: "work", ReadOnly: true, MaxFileBytes: 1, MaxEntries: 1}},
		{name: "empty root", grants: fsroot.Grants{}, field: "root"},
		{name: "negative max_file_bytes", grants: fsroot.Grants{Root: "/srv", MaxFileBytes: -1}, field: "max_file_bytes"},
		{name: "negative max_entries", grants: fsroot.Grants{Root: "/srv", MaxEntries: -5}, field: "max_entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.grants.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var fe *grant.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Validate = %v, want a *grant.FieldError for %q", err, tc.field)
			}
		})
	}
}

// TestConcurrent runs every operation from several goroutines at once; run
// with -race.
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fsroot.Grants{})
	mustWrite(t, e.in("shared/f"), "x")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			dir := "g" + string(rune('0'+g))
			for i := range 20 {
				name := dir + "/f"
				if err := e.fs.MkdirAll(ctx, dir); err != nil {
					t.Error(err)
					return
				}
				if err := e.fs.WriteFile(ctx, name, []byte{byte(i)}); err != nil {
					t.Error(err)
					return
				}
				if _, err := e.fs.ReadFile(ctx, "shared/f"); err != nil {
					t.Error(err)
					return
				}
				if _, err := collectWalk(ctx, e.fs, "."); err != nil && handle.CodeOf(err) != protocol.CodeConflict {
					t.Error(err)
					return
				}
				if err := e.fs.Rename(ctx, name, name+".old"); err != nil {
					t.Error(err)
					return
				}
				if err := e.fs.Remove(ctx, name+".old"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
