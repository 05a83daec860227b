package partialjson_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/brainrt/brain/internal/partialjson"
)

func TestComplete(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string // want "" means nil
	}{
		{"empty", ``, ``},
		{"whitespace", " \n\t", ``},
		{"open object", `{`, `{}`},
		{"open array", `[`, `[]`},
		{"dangling key start", `{"ti`, `{}`},
		{"dangling key", `{"title"`, `{}`},
		{"dangling colon", `{"title":`, `{}`},
		{"dangling key after a value", `{"a":1,"b`, `{"a":1}`},
		{"trailing comma", `{"a":1,`, `{"a":1}`},
		{"string cut", `{"title":"Q3 rev`, `{"title":"Q3 rev"}`},
		{"string cut after escape", `{"t":"a\n`, `{"t":"a\n"}`},
		{"string cut in an escape", `{"t":"a\`, `{"t":"a"}`},
		{"string cut in a unicode escape", `{"t":"a\u00`, `{"t":"a"}`},
		{"string cut in a UTF-8 sequence", "{\"t\":\"caf\xc3", `{"t":"caf"}`},
		{"string whole UTF-8", "{\"t\":\"café", `{"t":"café"}`},
		{"nested", `{"a":{"b":[1,{"c":"d`, `{"a":{"b":[1,{"c":"d"}]}}`},
		{"number cut", `{"n":12`, `{"n":12}`},
		{"number cut at a dot", `{"n":1.`, `{"n":1}`},
		{"number cut at an exponent", `[1e+`, `[1]`},
		{"minus alone", `{"n":-`, `{}`},
		{"literal cut", `{"a":1,"ok":tr`, `{"a":1}`},
		{"literal cut in an array", `[true,fal`, `[true]`},
		{"literal whole", `[true,false,null`, `[true,false,null]`},
		{"closed inner", `{"a":[1,2],"b":{}`, `{"a":[1,2],"b":{}}`},
		{"complete", `{"a":[1,2]}`, `{"a":[1,2]}`},
		{"complete with trailing space", "{\"a\":1}  \n", `{"a":1}`},
		{"top-level string cut", `"abc`, `"abc"`},
		{"top-level number", `42`, `42`},
		{"top-level literal cut", `nul`, ``},
		{"garbage", `{"a":x`, ``},
		{"after the end", `{} {`, ``},
		{"bad escape", `{"a":"\x`, ``},
		{"control character", "{\"a\":\"\x01", ``},
		{"missing colon", `{"a" 1`, ``},
		{"wrong closer", `[1}`, ``},
		{"leading zero", `[01,`, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := partialjson.Complete([]byte(tc.in))
			if tc.want == "" {
				if got != nil {
					t.Fatalf("Complete(%q) = %q, want nil", tc.in, got)
				}
				return
			}
			if string(got) != tc.want {
				t.Fatalf("Complete(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("Complete(%q) = %q is not JSON", tc.in, got)
			}
		})
	}
}

// TestCompleteDepth: nesting beyond MaxDepth completes to nothing rather
// than to something a decoder refuses.
func TestCompleteDepth(t *testing.T) {
	ok := bytes.Repeat([]byte("["), partialjson.MaxDepth)
	if got := partialjson.Complete(ok); !json.Valid(got) {
		t.Fatalf("depth %d: %q", partialjson.MaxDepth, got)
	}
	if got := partialjson.Complete(append(ok, '[')); got != nil {
		t.Fatalf("depth %d: %q, want nil", partialjson.MaxDepth+1, got)
	}
}

// TestCompleteEveryPrefix: every prefix of each document completes to
// valid JSON (or nothing), and the whole document to itself.
func TestCompleteEveryPrefix(t *testing.T) {
	for i, doc := range []string{
		`{"title":"Quarterly \"numbers\" \u00e9","points":[1,-2.5e3,0.25,true,false,null,{"x":[]}],"meta":{"by":"ada","tags":["a","b"]}}`,
		`[{"a":"ß∂ƒ😀"},[[[]]],"",0,-0,1E9]`,
		`  {"spaced" :  [ 1 , 2 ] , "s" : "t" }  `,
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkPrefixes(t, []byte(doc)) })
	}
}

func checkPrefixes(t *testing.T, doc []byte) {
	t.Helper()
	for n := range len(doc) + 1 {
		got := partialjson.Complete(doc[:n])
		if got != nil && (!json.Valid(got) || !utf8.Valid(got)) {
			t.Fatalf("Complete(%q) = %q: not valid JSON", doc[:n], got)
		}
	}
	if got := partialjson.Complete(doc); !bytes.Equal(got, bytes.TrimRight(doc, " \t\r\n")) {
		t.Fatalf("Complete(%q) = %q, want the document", doc, got)
	}
}

// FuzzComplete: whatever the input, Complete never panics and returns valid
// JSON or nil; a valid document comes back as itself, and each of its
// prefixes completes to valid JSON or nil. Seeds: testdata/fuzz/FuzzComplete.
func FuzzComplete(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		got := partialjson.Complete(in)
		if got != nil && !json.Valid(got) {
			t.Fatalf("Complete(%q) = %q: not valid JSON", in, got)
		}
		if len(in) <= 4096 && json.Valid(in) && utf8.Valid(in) && nesting(in) <= partialjson.MaxDepth {
			checkPrefixes(t, in)
		}
	})
}

// nesting is the deepest bracket nesting of a valid document (brackets in
// strings counted too: an overestimate is fine).
func nesting(b []byte) int {
	d, m := 0, 0
	for _, c := range b {
		switch c {
		case '[', '{':
			d++
			m = max(m, d)
		case ']', '}':
			d--
		}
	}
	return m
}

func ExampleComplete() {
	for _, in := range []string{`{"title":"Q3 rev`, `{"title":"Q3","points":[1,`, `{"title":"Q3","po`} {
		fmt.Println(string(partialjson.Complete([]byte(in))))
	}
	// Output:
	// {"title":"Q3 rev"}
	// {"title":"Q3","points":[1]}
	// {"title":"Q3"}
}

// BenchmarkComplete completes a 64 KiB prefix cut inside a string.
func BenchmarkComplete(b *testing.B) {
	doc := []byte(`{"title":"Release notes","points":[1,2,3],"body":"` + string(bytes.Repeat([]byte("Ship the render streams. "), 64<<10/25)))
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if partialjson.Complete(doc) == nil {
			b.Fatal("nil")
		}
	}
}
