package fsroot_test

import (
	"context"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
)

// TestProcRoot uses /proc/self as a root: its files report size 0 yet have
// content, which exercises the read bound, and its "magic" links point at
// absolute paths, which os.Root refuses. (Its other files are readable:
// docs/handle-fs.md says never to grant a root containing /proc.)
func TestProcRoot(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, g fsroot.Grants) *env {
		t.Helper()
		g.Root = "/proc/self"
		fsys, err := fsroot.New(g)
		if err != nil {
			t.Skipf("no /proc/self: %v", err)
		}
		t.Cleanup(func() { fsys.Close() })
		return &env{root: g.Root, fs: fsys}
	}
	t.Run("size 0 file is read to its end", func(t *testing.T) {
		e := open(t, fsroot.Grants{})
		data, err := e.fs.ReadFile(ctx, "status")
		if err != nil || len(data) == 0 {
			t.Fatalf("ReadFile(status) = %d bytes, %v", len(data), err)
		}
	})
	t.Run("size 0 file beyond the limit", func(t *testing.T) {
		e := open(t, fsroot.Grants{MaxFileBytes: 16})
		_, err := e.fs.ReadFile(ctx, "status")
		e.wantCode(t, err, protocol.CodeTooLarge)
	})
	for _, p := range []string{"root/etc/hostname", "cwd", "exe"} {
		t.Run("magic link "+p, func(t *testing.T) {
			e := open(t, fsroot.Grants{})
			_, err := e.fs.ReadFile(ctx, p)
			e.wantCode(t, err, protocol.CodePathEscape)
		})
	}
}
