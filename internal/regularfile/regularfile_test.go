//go:build unix

package regularfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/brainrt/brain/internal/regularfile"
)

// TestRead: a regular file within the limit is read; a FIFO is refused at
// once rather than blocking the open until a writer comes (the probe's
// hang), as are a directory, a device and a file over the limit.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.tool.json")
	if err := os.WriteFile(ok, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := regularfile.Read(ok, 2); err != nil || string(b) != "{}" {
		t.Fatalf("regular file: %q %v", b, err)
	}
	if _, err := regularfile.Read(ok, 1); err == nil || !strings.Contains(err.Error(), "more than the 1 allowed") {
		t.Fatalf("over the limit: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.wasm")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "a named pipe", dir: "a directory", "/dev/zero": "a character device"} {
		if _, err := regularfile.Read(path, 1<<20); err == nil || !strings.Contains(err.Error(), "is not a regular file ("+want+")") {
			t.Errorf("%s: %v, want refused as %s", path, err, want)
		}
	}
	if _, err := regularfile.Read(filepath.Join(dir, "missing"), 1); !os.IsNotExist(err) {
		t.Fatalf("missing: %v", err)
	}
}
