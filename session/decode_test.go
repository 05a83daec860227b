package session

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// stdDecode is what decodeJSON must agree with.
func stdDecode(raw []byte) (any, error) {
	if !json.Valid(raw) {
		return nil, os.ErrInvalid
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, os.ErrInvalid
	}
	return v, nil
}

var decodeSeeds = []string{
	`{"text":"the quick brown fox"}`, `[]`, `{}`, `[1,-2.5e10,0.1,true,false,null]`,
	`"a\u00e9\"\\\/\n"`, `{"a":{"b":[{"c":"\ud83d\ude00"}]}}`, ` {"k" : 1 , "k":2} `,
	`12345678901234567890123`, `{"":""}`, `"\u0000"`, `[[[[]]]]`, `-0`, `1E+2`,
}

func TestDecodeJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range decodeSeeds {
		got, err := decodeJSON([]byte(s))
		want, werr := stdDecode([]byte(s))
		if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeJSON(%s) = %#v, %v; encoding/json gives %#v, %v", s, got, err, want, werr)
		}
	}
}

func TestDecodeJSONRejects(t *testing.T) {
	for _, s := range []string{``, `{`, `{"a":}`, `[1,]`, `nul`, `"x`, `{} {}`, `01`} {
		if v, err := decodeJSON([]byte(s)); err == nil {
			t.Errorf("decodeJSON(%q) = %#v, want an error", s, v)
		}
	}
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	if _, err := decodeJSON([]byte(deep)); err == nil {
		t.Error("decodeJSON accepted nesting deeper than maxDepth")
	}
}

// FuzzDecodeJSON: decodeJSON never panics and agrees with encoding/json
// (UseNumber) on every input both accept; it rejects what encoding/json
// rejects.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("../protocol/testdata/golden/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeJSON(raw)
		want, werr := stdDecode(raw)
		if werr != nil {
			if err == nil {
				t.Fatalf("decodeJSON accepted %q, which encoding/json rejects: %v", raw, werr)
			}
			return
		}
		if err != nil {
			if err == errTooDeep {
				return
			}
			t.Fatalf("decodeJSON rejected %q: %v", raw, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeJSON(%q) = %#v, want %#v", raw, got, want)
		}
	})
}
