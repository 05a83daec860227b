package provide_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/provide"
)

// FuzzParse feeds the grants loader hostile YAML: it must never panic, hang
// or accept what Validate refuses, and every refusal must be an *Error
// placed in the file. The seed corpus is testdata/grants-seeds/*.yaml
// (syntax oddities, anchors and merge keys, an alias bomb, every section)
// plus the shipped example; inputs the fuzzer finds failing land in
// testdata/fuzz/FuzzParse and run with every go test.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/grants-seeds/*.yaml")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed corpus in testdata/grants-seeds: %v", err)
	}
	for _, p := range append(seeds, exampleFile) {
		text, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text)
	}
	dir := f.TempDir()
	for _, d := range []string{"workspace", "ws"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	name := filepath.Join(dir, "grants.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		g, err := provide.Parse(data, name)
		// Generous: real files parse in microseconds; an alias bomb took
		// 16s for 22 anchors before the loader bounded its work.
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Parse took %v on %d bytes", d, len(data))
		}
		if err != nil {
			checkParseError(t, err, name)
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("Parse accepted grants that Validate refuses: %v", err)
		}
		for _, p := range []string{g.Workspace} {
			if p != "" && !filepath.IsAbs(p) {
				t.Fatalf("path %q is not absolute", p)
			}
		}
		if g.FS != nil && (g.FS.Root == "" || !filepath.IsAbs(g.FS.Root)) {
			t.Fatalf("fs.root %q is not an absolute path", g.FS.Root)
		}
		if g.Exec != nil && (g.Exec.Root == "" || !filepath.IsAbs(g.Exec.Root)) {
			t.Fatalf("exec.root %q is not an absolute path", g.Exec.Root)
		}
	})
}

// checkParseError checks that err, from Parse of a file named name, is an *Error that names the file and a position in it
// and says something, or an error that names the file.
func checkParseError(t *testing.T, err error, name string) {
	t.Helper()
	var pe *provide.Error
	if !errors.As(err, &pe) {
		if !strings.Contains(err.Error(), name) {
			t.Fatalf("error %q (%T) does not name the file", err, err)
		}
		return
	}
	if pe.File != name || pe.Line < 1 || pe.Column < 1 || strings.TrimSpace(pe.Msg) == "" {
		t.Fatalf("error %#v: want the file, a line and a column from 1, and a message", pe)
	}
}

func TestParseBounds(t *testing.T) {
	bomb, err := os.ReadFile("testdata/grants-seeds/alias-bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"alias bomb", bomb, "expands to more than 100000 values"},
		{"too large", []byte("# " + strings.Repeat("x", 1<<20) + "\n"), "a grants file may have at most 1048576"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := provide.Parse(tc.data, "grants.yaml")
			// Unbounded, the alias bomb took 16 s on a quiet machine, and each
			// more anchor doubles it; bounded, it takes 50 ms quiet and was
			// seen at 2 s with the load at 15 on 2 cores. 8 s tells them
			// apart on a loaded machine; the error below is the real proof.
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("Parse took %v", d)
			}
			var pe *provide.Error
			if !errors.As(err, &pe) || !strings.Contains(pe.Msg, tc.want) {
				t.Fatalf("Parse = %v, want an *Error saying %q", err, tc.want)
			}
		})
	}
	t.Run("Load reads a bounded prefix", func(t *testing.T) {
		// /dev/zero never ends: Load must stop reading.
		if _, err := os.Stat("/dev/zero"); err != nil {
			t.Skip("no /dev/zero")
		}
		_, err := provide.Load("/dev/zero")
		var pe *provide.Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "at most 1048576") {
			t.Fatalf("Load(/dev/zero) = %v, want the size error", err)
		}
	})
}
