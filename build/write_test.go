package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/tool"
)

// TestCommitRefusesWhatNoHostLoads: a manifest over tool.MaxManifestBytes
// or a Go payload over abi.MaxPayloadBytes is refused with its size and
// the bound, before anything is written — a host would refuse it at
// attach, far from the build that made it.
func TestCommitRefusesWhatNoHostLoads(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.wasm")
	if err := os.WriteFile(small, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.wasm")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(abi.MaxPayloadBytes + 1); err != nil { // sparse: no 64 MiB written
		t.Fatal(err)
	}
	f.Close()
	ok := staged{art: Artifact{Package: "ok", Manifest: tool.Manifest{Name: "ok"}}, ext: ".wasm", payloadFile: small}
	for _, c := range []struct {
		name string
		bad  staged
		want string
	}{
		{"manifest", staged{art: Artifact{Package: "big", Manifest: tool.Manifest{Name: "big", Description: strings.Repeat("x", tool.MaxManifestBytes)}}, ext: ".mjs", payload: []byte("export {}")},
			`tool "big": its manifest has`},
		{"payload", staged{art: Artifact{Package: "fat", Manifest: tool.Manifest{Name: "fat"}}, ext: ".wasm", payloadFile: huge},
			`tool "fat": its payload has 67108865 bytes, more than the 67108864 (64 MiB) a host loads`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, err := commit(out, []staged{ok, c.bad})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("commit: %v, want %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("the output directory was made (%v): the tool before the refused one was written", err)
			}
		})
	}
}
