package abi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/brainrt/brain/internal/abi"
)

// records are the JSON records that cross the boundary, each decoded by
// the side that did not write it: the host decodes a guest's requests, the
// guest the host's responses and its invoke request.
var records = []struct {
	name string
	new  func() any
}{
	{"InvokeRequest", func() any { return new(abi.InvokeRequest) }},
	{"PathRequest", func() any { return new(abi.PathRequest) }},
	{"WriteRequest", func() any { return new(abi.WriteRequest) }},
	{"TwoPathRequest", func() any { return new(abi.TwoPathRequest) }},
	{"WalkEntry", func() any { return new([]abi.WalkEntry) }},
	{"JSRequest", func() any { return new(abi.JSRequest) }},
	{"PageRequest", func() any { return new(abi.PageRequest) }},
}

// recordSeeds seed FuzzRecords: one record of each kind, and hostile ones.
var recordSeeds = []string{
	`{"id":"c1","input":{"text":"hi"},"workspace":"/w"}`,
	`{"path":"notes.txt"}`,
	`{"path":"a","data":"aGk="}`,
	`{"from":"a","to":"../b"}`,
	`[{"path":"a","info":{"name":"a","size":1,"is_dir":false}}]`,
	`{"source":"1+1","args":[1,2]}`,
	`{"url":"https://example.com","selector":"h1","expression":"1"}`,
	`{"input":` + string(bytes.Repeat([]byte("["), 3000)) + `}`,
	`{"data":"not base64"}`,
	"\xff\xfe",
}

// FuzzRecords: no record decoder panics on any bytes, and what one
// accepts re-encodes to a fixed point: decode(encode(r)) encodes the same.
func FuzzRecords(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range records {
			v := r.new()
			if json.Unmarshal(b, v) != nil {
				continue
			}
			enc, err := json.Marshal(v)
			if err != nil {
				continue // a RawMessage holding what the peer sent; refused when sent on
			}
			v2 := r.new()
			if err := json.Unmarshal(enc, v2); err != nil {
				t.Fatalf("%s: re-encoded record does not decode: %v\n%s", r.name, err, enc)
			}
			enc2, err := json.Marshal(v2)
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("%s: not a fixed point: %v\n%s\n%s", r.name, err, enc, enc2)
			}
		}
	})
}

// FuzzPack: Unpack undoes Pack for every pointer and length.
func FuzzPack(f *testing.F) {
	f.Add(uint32(0), uint32(0))
	f.Add(uint32(1<<32-1), uint32(1<<32-1))
	f.Add(uint32(1024), uint32(17))
	f.Fuzz(func(t *testing.T, ptr, n uint32) {
		if p, m := abi.Unpack(abi.Pack(ptr, n)); p != ptr || m != n {
			t.Fatalf("Unpack(Pack(%d, %d)) = %d, %d", ptr, n, p, m)
		}
	})
}

func ExamplePack() {
	v := abi.Pack(1024, 17) // what brain_invoke returns: the result's pointer and length
	ptr, n := abi.Unpack(v)
	fmt.Println(ptr, n)
	// Output: 1024 17
}

var writeSeeds = flag.Bool("write-fuzz-seeds", false, "write the seed corpus of FuzzRecords into testdata/fuzz")

// TestFuzzSeeds checks that testdata/fuzz/FuzzRecords holds the seeds in
// the code, and rewrites them with -write-fuzz-seeds.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRecords")
	if *writeSeeds {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range recordSeeds {
		b := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(s))
		path := filepath.Join(dir, fmt.Sprintf("seed%d", i))
		if *writeSeeds {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s is not the seed in the code (%v); run go test -run TestFuzzSeeds ./internal/abi -args -write-fuzz-seeds", path, err)
		}
	}
}

// FuzzParseInvoke: the invoke request decoder never panics, and it undoes
// AppendInvoke.
func FuzzParseInvoke(f *testing.F) {
	f.Add("c1", "/w", []byte(`{"text":"hi"}`), []byte("\x02\x00\x00\x00c1\x00\x00\x00\x00{}"))
	f.Add("", "", []byte{}, []byte("\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, id, workspace string, input, raw []byte) {
		_, _, _, _ = abi.ParseInvoke(raw)
		gotID, gotWS, gotIn, err := abi.ParseInvoke(abi.AppendInvoke(nil, id, workspace, input))
		if err != nil || gotID != id || gotWS != workspace || !bytes.Equal(gotIn, input) {
			t.Fatalf("round trip: %q %q %q %v", gotID, gotWS, gotIn, err)
		}
	})
}
