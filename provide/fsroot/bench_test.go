package fsroot_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/brainrt/brain/provide/fsroot"
)

// benchFile writes a 4 KiB file and returns its directory and name.
func benchFile(b *testing.B) (dir, name string) {
	b.Helper()
	dir = b.TempDir()
	name = "bench.txt"
	if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, name
}

// BenchmarkReadFile4K reads a 4 KiB file through the handle: path checks,
// os.Root resolution, the link-count check and the bounded read.
func BenchmarkReadFile4K(b *testing.B) {
	dir, name := benchFile(b)
	fsys, err := fsroot.New(fsroot.Grants{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		data, err := fsys.ReadFile(ctx, name)
		if err != nil || len(data) != 4096 {
			b.Fatalf("ReadFile: %d bytes, %v", len(data), err)
		}
	}
}

// BenchmarkOSReadFile4K is the baseline: os.ReadFile of the same file by
// its host path.
func BenchmarkOSReadFile4K(b *testing.B) {
	dir, name := benchFile(b)
	p := filepath.Join(dir, name)
	b.ReportAllocs()
	for b.Loop() {
		data, err := os.ReadFile(p)
		if err != nil || len(data) != 4096 {
			b.Fatalf("os.ReadFile: %d bytes, %v", len(data), err)
		}
	}
}
