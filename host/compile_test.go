package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// TestCompileFillsTheCache: Artifact.Compile seals an entry without
// provisioning, a host started later over the same directory runs the
// payload from that entry (it is not rewritten), and a payload that is not
// what its manifest names, or that the host does not hold, is refused
// before anything compiles.
func TestCompileFillsTheCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	h, _ := cachedHost(t, dir)
	must(t, tiny(t, h, "a", "A").Compile(context.Background()))
	es := entries(t, dir)
	if len(es) != 1 {
		t.Fatalf("entries after Compile = %v, want 1", es)
	}
	before, err := os.Stat(es[0])
	must(t, err)
	if st := h.Stats(); len(st) != 0 {
		t.Fatalf("Compile provisioned: stats %+v", st)
	}

	later, logs := cachedHost(t, dir)
	if got := run(t, tiny(t, later, "a", "A")); got != `"A"` {
		t.Fatalf("value = %s, want \"A\"", got)
	}
	after, err := os.Stat(es[0])
	must(t, err)
	if !os.SameFile(before, after) || logs.String() != "" {
		t.Fatalf("the entry Compile wrote was rewritten (%v) or warned about:\n%s", !os.SameFile(before, after), logs)
	}

	unknown := h.Artifact(tool.Manifest{Format: tool.Format, Name: "u", Hosting: tool.HostingProvisioned,
		Payload: host.Identity([]byte("not held")), Runtime: "wasm/2"})
	if out := protocol.OutcomeOf(unknown.Compile(context.Background())); out.IsOK() || out.Err.Code != protocol.CodeNotFound {
		t.Fatalf("Compile of a payload the host does not hold: %+v, want not_found", out.Err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if out := protocol.OutcomeOf(tiny(t, h, "b", "B").Compile(ctx)); out.IsOK() || out.Err.Code != protocol.CodeCancelled {
		t.Fatalf("Compile with a cancelled context: %+v, want cancelled", out.Err)
	}
}
