package jsonkeys_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/brainrt/brain/internal/jsonkeys"
)

func TestDuplicate(t *testing.T) {
	many := func(dup string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		if dup != "" {
			b.WriteString(`"` + dup + `":0,`)
		}
		b.WriteString(`"end":[{"x":1}]}`)
		return b.String()
	}
	for _, c := range []struct {
		in            string
		fold          bool
		first, second string
	}{
		{`{"path":"ok.txt","path":"secret.txt"}`, false, "path", "path"},
		{`{"path":"ok","p\u0061th":"bad"}`, false, "path", "path"}, // the same key, escaped
		{`{"a":{"b":1,"b":2}}`, false, "b", "b"},
		{`[1,{"x":[{"y":1,"y":1}]}]`, false, "y", "y"},
		{`{"mode":"read","MODE":"write"}`, false, "", ""},
		{`{"mode":"read","MODE":"write"}`, true, "mode", "MODE"},
		{`{"a":1,"b":{"a":2},"c":[{"a":3}]}`, true, "", ""}, // a key in another object is another key
		{`{"s":"a\"b","t":"}{"}`, false, "", ""},
		{many(""), false, "", ""},
		{many("k7"), false, "k7", "k7"},
		{many("K7"), false, "", ""},
		{many("K7"), true, "k7", "K7"},
		{many("k\u212a"), true, "", ""},             // a Kelvin sign after k: k and K are not one rune
		{`{"K":1,"\u212a":2}`, true, "K", "\u212a"}, // the Kelvin sign folds to k, as encoding/json matches it
		{`{"a":1,"a"`, false, "a", "a"},
		{`{"a":1,`, false, "", ""}, // not JSON: the decoder's to say
		{`"just a string"`, false, "", ""},
		{`{}`, false, "", ""},
	} {
		first, second, ok := jsonkeys.Duplicate([]byte(c.in), c.fold)
		if ok != (c.first != "") || first != c.first || second != c.second {
			t.Errorf("Duplicate(%s, %v) = %q %q %v, want %q %q", c.in, c.fold, first, second, ok, c.first, c.second)
		}
	}
}

func FuzzDuplicate(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"C":2}]}}`, `[`, `{"\u0061":1,"a":2}`, `{"a":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		jsonkeys.Duplicate(b, true) // ends, on any bytes
		jsonkeys.Duplicate(b, false)
	})
}

func BenchmarkDuplicate(b *testing.B) {
	in := []byte(`{"path":"notes/today.md","limit":100,"options":{"follow":true,"depth":3}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := jsonkeys.Duplicate(in, false); ok {
			b.Fatal("found one")
		}
	}
}
