package jsonvalid_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/brainrt/brain/internal/jsonvalid"
)

var jsonCases = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, ` { "a" : [ 1 , 2.5e-3 , -0 , true , false , null , "x" ] } `,
	`{"text":"the quick brown fox jumps over the lazy dog"}`, `"\u00e9\n\"\\\/\b\f\r\t"`, "\"\xff\xfe\"",
	`{`, `}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`, `[1 2]`, `01`, `-`, `1.`, `1e`, `1e+`, `.5`, `+1`,
	`tru`, `truex`, `nul`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"\x01\"", `1 1`, `[] []`, `{"a":1}}`,
	`[[[[]]]]`, `[[[[]]]`, `"a"` + "\x00", "\t\r\n1\t\r\n", `-0.0e+0`, `1E5`, `[-]`, `{"a":[{"b":{}}]}`,
	strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000),
	strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001),
	strings.Repeat(`{"a":`, 10_000) + "1" + strings.Repeat("}", 10_000),
}

// TestValid: Valid agrees with encoding/json.Valid.
func TestValid(t *testing.T) {
	for _, c := range jsonCases {
		if got, want := jsonvalid.Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.40q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

// FuzzValid: Valid agrees with encoding/json.Valid on any input.
func FuzzValid(f *testing.F) {
	for _, c := range jsonCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsonvalid.Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	out := []byte(`{"text":"the quick brown fox jumps over the lazy dog"}`)
	for b.Loop() {
		if !jsonvalid.Valid(out) {
			b.Fatal("invalid")
		}
	}
}
