package jshost_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/brainrt/brain/host/jshost"
)

// FuzzDecodeManifest: a manifest read from disk never panics the decoder,
// and one it accepts is a valid js/1 manifest with a well-formed identity.
func FuzzDecodeManifest(f *testing.F) {
	if b, err := os.ReadFile("testdata/echo.tool.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"format":"tool/v1","name":"x","input_schema":{},"requires":[],"binding_names":[],"hosting":"provisioned","runtime":"js/1","payload":"sha256:00"}`))
	f.Add([]byte(`{"format":"tool/v1"} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := jshost.DecodeManifest(b)
		if err != nil {
			return
		}
		if m.Runtime != "js/1" || len(m.Payload) != len("sha256:")+64 {
			t.Fatalf("accepted %s", b)
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzBridge: whatever operation and argument a payload sends through its
// host function, the reply is JSON, and no handle is reached that the
// call does not hold (the fuzzed calls hold none).
func FuzzBridge(f *testing.F) {
	for _, seed := range [][2]string{
		{"fs.readFile", `{"path":"x"}`}, {"exec.run", `{"program":"sh"}`}, {"net.fetch", `{"url":"http://x"}`},
		{"js.call", `{"source":"() => 1"}`}, {"page.navigate", `{"url":"x"}`}, {"progress", `{"done":1}`},
		{"nope", `{}`}, {"fs.readFile", `{`}, {"", ""}, {"pa", "null"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, op, arg string) {
		out := jshost.Serve(op, arg)
		var r struct {
			OK    bool            `json:"ok"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("reply %q is not JSON: %v", out, err)
		}
		if r.OK && op != "progress" {
			t.Fatalf("op %q on a call without handles answered %s", op, out)
		}
	})
}
