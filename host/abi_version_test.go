package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/tool"
)

// TestABIVersionRefusedAtAttach: an artifact built for an ABI this host
// does not implement is refused when it is read or attached, with a
// message naming both versions and what to do, never at call time. The
// ABI 1 case is a guest as last month's docs/abi.md described it: no
// runtime in its manifest and no version marker in its payload.
func TestABIVersionRefusedAtAttach(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		runtime string // the manifest's
		marker  string // the payload's version export
		readErr string // ReadArtifact's error, if it refuses
		attErr  string // else Provision's
	}{
		{name: "ABI 1 guest: no runtime, no marker", runtime: "", marker: "",
			readErr: "names no runtime: it was built by a brain from before the ABI was versioned"},
		{name: "manifest of a future wasm ABI", runtime: "wasm/3", marker: "brain_abi_v3",
			readErr: "was built for runtime wasm/3; this host implements wasm/2: rebuild it with `brain build`"},
		{name: "another runtime", runtime: "python/1", marker: "",
			readErr: `needs runtime "python/1", which the WebAssembly host does not run`},
		{name: "manifest says wasm/2, payload has no marker", runtime: "wasm/2", marker: "",
			attErr: "exports no ABI version (brain_abi_v2): it was built for ABI 1 or by an older brain; this host implements ABI 2: rebuild it with `brain build`"},
		{name: "manifest says wasm/2, payload marks ABI 3", runtime: "wasm/2", marker: "brain_abi_v3",
			attErr: "the payload was built for ABI 3; this host implements ABI 2"},
		{name: "current", runtime: "wasm/2", marker: "brain_abi_v2"},
	}
	h := newHost(t, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			payload := tinyModuleMarked("ok", tc.marker)
			m := tool.Manifest{Format: tool.Format, Name: "old", InputSchema: json.RawMessage(`{"type":"object"}`),
				Requires: []handle.Kind{}, BindingNames: []string{}, Hosting: tool.HostingProvisioned,
				Payload: host.Identity(payload), Runtime: tc.runtime}
			mj, err := json.Marshal(m)
			must(t, err)
			must(t, os.WriteFile(filepath.Join(dir, "old.tool.json"), mj, 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "old.wasm"), payload, 0o644))

			a, err := h.LoadManifest(filepath.Join(dir, "old.tool.json"))
			if tc.readErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.readErr) {
					t.Fatalf("LoadManifest: got %v, want an error containing %q", err, tc.readErr)
				}
				// A manifest made in code is refused at attach alike.
				if _, err := h.Artifact(m).Provision(ctx, tool.Handles{}, nil); err == nil || !strings.Contains(err.Error(), tc.readErr) {
					t.Fatalf("Provision: got %v, want an error containing %q", err, tc.readErr)
				}
				return
			}
			must(t, err)
			inst, err := a.Provision(ctx, tool.Handles{}, nil)
			if tc.attErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.attErr) {
					t.Fatalf("Provision: got %v, want an error containing %q", err, tc.attErr)
				}
				return
			}
			must(t, err)
			defer inst.Close()
			v, err := inst.Invoke(ctx, &tool.Call{ID: "c", Input: json.RawMessage(`{}`)})
			if err != nil || string(v) != `"ok"` {
				t.Fatalf("Invoke: %s, %v", v, err)
			}
		})
	}
}
