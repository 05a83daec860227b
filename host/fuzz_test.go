package host

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/brainrt/brain/protocol"
)

var writeSeeds = flag.Bool("write-fuzz-seeds", false, "write the seed corpora of the fuzz tests into testdata/fuzz")

var (
	fuzzKey      = bytes.Repeat([]byte{7}, 32)
	fuzzBinding  = "brain-cache/1 instrument/0 wazero-dev-amd64-linux go1.26"
	fuzzIdentity = "sha256:" + string(bytes.Repeat([]byte("ab"), 32))
	fuzzWazKey   = string(bytes.Repeat([]byte("0f"), 32))
)

func entrySeeds() [][]byte {
	good := sealEntry(fuzzKey, cacheEntry{binding: fuzzBinding, identity: fuzzIdentity, wazeroKey: fuzzWazKey, code: []byte("WAZEVO\x03dev\x01\x00\x00\x00")})
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	return [][]byte{good, flipped, good[:len(good)/2], entryMagic, {}, append(bytes.Clone(entryMagic), 0xff, 0xff, 0xff, 0xff)}
}

func manifestSeeds() [][]byte {
	return [][]byte{
		[]byte(`{"format":"tool/v1","name":"echo","description":"Echo.","input_schema":{"type":"object"},"requires":[],"binding_names":[],"hosting":"provisioned","payload":"` + fuzzIdentity + `","runtime":"wasm/2"}`),
		[]byte(`{"format":"tool/v1","name":"r","description":"","input_schema":{"type":"object"},"requires":["exec","exec"],"binding_names":["p"],"hosting":"provisioned","payload":"sha256:00"}`),
		[]byte(`{"format":"tool/v1","name":"x","input_schema":{},"hosting":"provisioned","payload":"` + fuzzIdentity + `","extra":1}`),
		[]byte(`{} {}`),
		[]byte(`[`),
	}
}

func outcomeSeeds() [][]byte {
	return [][]byte{
		[]byte(`{"ok":true,"value":{"text":"hi"}}`),
		[]byte(`{"ok":false,"error":{"code":"path_escape","message":"no"}}`),
		[]byte(`{"ok":true}`),
		[]byte(`{"ok":false}`),
		[]byte(`null`),
		[]byte(`{"ok":true,"value":` + string(bytes.Repeat([]byte("["), 2000)) + `}`),
	}
}

func resultSeeds() [][]byte {
	return [][]byte{
		[]byte(`v{"text":"hi"}`),
		[]byte(`v{"text":`),
		[]byte(`o{"ok":false,"error":{"code":"rate_limited","message":"later"}}`),
		[]byte(`o{"ok":true,"value":1}`),
		[]byte(`x`),
		{},
	}
}

// TestFuzzSeeds checks that testdata/fuzz holds the seed corpora of the
// fuzz tests (so that `go test` replays them even without -fuzz), and
// rewrites them with -write-fuzz-seeds.
func TestFuzzSeeds(t *testing.T) {
	for name, seeds := range map[string][][]byte{"FuzzOpenEntry": entrySeeds(), "FuzzDecodeManifest": manifestSeeds(),
		"FuzzDecodeOutcome": outcomeSeeds(), "FuzzDecodeResult": resultSeeds()} {
		dir := filepath.Join("testdata", "fuzz", name)
		if *writeSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for i, s := range seeds {
			b := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(s)))
			path := filepath.Join(dir, fmt.Sprintf("seed%d", i))
			if *writeSeeds {
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s is not the seed in the code (%v); run go test -run TestFuzzSeeds ./host -args -write-fuzz-seeds", path, err)
			}
		}
	}
}

// FuzzOpenEntry: a cache entry from disk never panics the decoder, and only
// the exact bytes sealed under the host's key open.
func FuzzOpenEntry(f *testing.F) {
	for _, s := range entrySeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := openEntry(fuzzKey, b, fuzzBinding, fuzzIdentity)
		if err != nil {
			return
		}
		if !bytes.Equal(sealEntry(fuzzKey, e), b) {
			t.Fatalf("opened an entry that is not what the key sealed: %q", b)
		}
		if e.identity != fuzzIdentity || e.binding != fuzzBinding || !isWazeroKey(e.wazeroKey) {
			t.Fatalf("opened an entry of another payload or build: %+v", e)
		}
	})
}

// FuzzSealOpen: whatever is sealed opens to the same fields.
func FuzzSealOpen(f *testing.F) {
	f.Add(fuzzBinding, fuzzIdentity, []byte("code"))
	f.Add("", "", []byte{})
	f.Fuzz(func(t *testing.T, binding, identity string, code []byte) {
		want := cacheEntry{binding: binding, identity: identity, wazeroKey: fuzzWazKey, code: code}
		got, err := openEntry(fuzzKey, sealEntry(fuzzKey, want), binding, identity)
		if err != nil {
			t.Fatal(err)
		}
		if got.binding != want.binding || got.identity != want.identity || got.wazeroKey != want.wazeroKey || !bytes.Equal(got.code, want.code) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		if _, err := openEntry(bytes.Repeat([]byte{8}, 32), sealEntry(fuzzKey, want), binding, identity); err == nil {
			t.Fatal("opened under another key")
		}
	})
}

// FuzzDecodeManifest: a tool.json never panics the decoder; what it accepts
// is a valid manifest that survives a round trip unchanged.
func FuzzDecodeManifest(f *testing.F) {
	for _, s := range manifestSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil || !isIdentity(m.Payload) {
			t.Fatalf("accepted an invalid manifest: %v %q", err, m.Payload)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeManifest(again)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v\n%s", err, again)
		}
		again2, _ := json.Marshal(m2)
		if !bytes.Equal(again, again2) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", again, again2)
		}
	})
}

// FuzzDecodeOutcome: the result record a guest returns never panics the
// host, and what decodes re-encodes to the same outcome.
func FuzzDecodeOutcome(f *testing.F) {
	for _, s := range outcomeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decodeOutcome(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(out)
		if err != nil {
			return // a value the guest made up that is not JSON is refused when it is sent on
		}
		var again protocol.Outcome
		if err := json.Unmarshal(enc, &again); err != nil {
			t.Fatalf("re-encoded outcome does not decode: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(out.Err, again.Err) {
			t.Fatalf("error changed: %+v / %+v", out.Err, again.Err)
		}
	})
}

// FuzzDecodeResult: what a guest's brain_invoke returns never panics the
// host; a value it accepts is JSON, and it keeps nothing of guest memory.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range resultSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		raw := bytes.Clone(b)
		out, err := decodeResult(raw)
		if err != nil {
			return
		}
		if out.IsOK() && !json.Valid(out.Value) {
			t.Fatalf("accepted a value that is not JSON: %q", out.Value)
		}
		clear(raw) // the guest reuses its memory
		if out.IsOK() && len(out.Value) > 0 && !json.Valid(out.Value) {
			t.Fatalf("the value aliases guest memory")
		}
	})
}
