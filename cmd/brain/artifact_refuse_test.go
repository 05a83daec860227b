package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/tool"
)

// markedModule is the smallest WebAssembly module exporting one function
// () -> () named marker: a payload whose ABI marker is all there is.
func markedModule(marker string) []byte {
	b := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
		0x03, 0x02, 0x01, 0x00} // function 0 of type 0
	export := append([]byte{0x01, byte(len(marker))}, marker...)
	export = append(export, 0x00, 0x00) // a function, index 0
	b = append(b, 0x07, byte(len(export)))
	b = append(b, export...)
	return append(b, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b) // code: an empty body
}

// writeArtifact writes name.tool.json of runtime rt and format (default
// tool.Format), with payload as name.<ext>, into dir.
func writeArtifact(t *testing.T, dir, name, rt, format string, payload []byte, ext string) string {
	t.Helper()
	if format == "" {
		format = tool.Format
	}
	id := host.Identity(payload)
	if ext == ".mjs" {
		id = jshost.Identity(payload)
	}
	m := tool.Manifest{Format: format, Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Requires: []handle.Kind{}, BindingNames: []string{}, Hosting: tool.HostingProvisioned, Payload: id, Runtime: rt}
	mj, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".tool.json")
	if err := os.WriteFile(path, mj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+ext), payload, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestArtifactsRefusedClearly (an artifact author's probe): what no host
// here can run is refused at once by inspect and run, naming what it is
// and what to do — a FIFO where a file should be (its open had blocked
// inspect, run and serve for good), a payload marked for another ABI
// (inspect had called it verified), a runtime js/N other than js/1 (sent
// to the WebAssembly host, which did not say this brain runs js/1), a
// manifest format of a newer brain.
func TestArtifactsRefusedClearly(t *testing.T) {
	dir := t.TempDir()
	fifoManifest := filepath.Join(dir, "pipe.tool.json")
	if err := syscall.Mkfifo(fifoManifest, 0o644); err != nil {
		t.Fatal(err)
	}
	fifoPayload := writeArtifact(t, dir, "pipepay", "wasm/2", "", markedModule("brain_abi_v2"), ".wasm")
	if err := os.Remove(filepath.Join(dir, "pipepay.wasm")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipepay.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	abi3 := writeArtifact(t, dir, "abi3", "wasm/2", "", markedModule("brain_abi_v3"), ".wasm")
	js2 := writeArtifact(t, dir, "js2", "js/2", "", []byte("export {}"), ".mjs")
	v2 := writeArtifact(t, dir, "v2", "wasm/2", "tool/v2", markedModule("brain_abi_v2"), ".wasm")
	tests := []struct {
		name, path, want string
	}{
		{"a FIFO as the manifest", fifoManifest, "is not a regular file (a named pipe)"},
		{"a FIFO as the payload", fifoPayload, "is not a regular file (a named pipe)"},
		{"a payload of ABI 3", abi3, "the payload was built for ABI 3; this host implements ABI 2: rebuild it with `brain build`"},
		{"runtime js/2", js2, "was built for runtime js/2; this brain's JavaScript host implements js/1: rebuild it with `brain build`, or run it with a brain that implements js/2"},
		{"format tool/v2", v2, `manifest format "tool/v2": this brain reads "tool/v1"; rebuild the tool with this brain's ` + "`brain build`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cmd := range [][]string{{"inspect", tt.path}, {"run", tt.path, "--input", "{}", "--cache", filepath.Join(dir, "cache"), "--workspace", dir}} {
				// run reports an attach's refusal as its outcome, on stdout.
				code, stdout, stderr := runCLI(t, cmd...)
				if code != exitFail || !strings.Contains(stderr+stdout, tt.want) || strings.Contains(stdout, "identity verified") {
					t.Errorf("brain %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", cmd[0], code, stdout, stderr, tt.want)
				}
			}
		})
	}
}
