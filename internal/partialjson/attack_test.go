package partialjson_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/partialjson"
)

// randomJSON writes a random JSON value of at most depth levels to b:
// every kind of value, escapes, multi-byte characters, numbers with
// fractions and exponents, and random whitespace between tokens.
func randomJSON(r *rand.Rand, b *bytes.Buffer, depth int) {
	ws := func() {
		for range r.IntN(3) {
			b.WriteByte(" \t\n\r"[r.IntN(4)])
		}
	}
	ws()
	k := r.IntN(8)
	if depth <= 0 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	case 1, 2:
		n := []string{"0", "-0", "7", "-12", "3.25", "1e9", "-4.5E-3", "12e+2", "0.001", "123456789012345678901234567890"}
		b.WriteString(n[r.IntN(len(n))])
	case 3, 4, 5:
		b.WriteByte('"')
		for range r.IntN(12) {
			switch r.IntN(6) {
			case 0:
				b.WriteString([]string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00e9`, `\ud83d\ude00`}[r.IntN(10)])
			case 1:
				b.WriteString([]string{"é", "€", "😀", "中"}[r.IntN(4)])
			default:
				b.WriteByte("abc xyz:,{}[]"[r.IntN(13)])
			}
		}
		b.WriteByte('"')
	case 6:
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				ws()
				b.WriteByte(',')
			}
			randomJSON(r, b, depth-1)
		}
		ws()
		b.WriteByte(']')
	case 7:
		b.WriteByte('{')
		for i := range r.IntN(4) {
			if i > 0 {
				ws()
				b.WriteByte(',')
			}
			ws()
			b.WriteString(strconv.Quote("k" + strconv.Itoa(i) + "_" + strconv.Itoa(r.IntN(100)))) // unique in its object
			ws()
			b.WriteByte(':')
			randomJSON(r, b, depth-1)
		}
		ws()
		b.WriteByte('}')
	}
	ws()
}

// TestAttackDifferential checks Complete against encoding/json on random
// documents: every prefix completes to valid JSON or nil, never to more
// than the prefix says (each completion's compact form starts like the
// document's whenever the prefix cut no token), and the whole document
// comes back equal to the input modulo whitespace.
func TestAttackDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for doc := range 3000 {
		b.Reset()
		randomJSON(r, &b, 5)
		in := b.Bytes()
		if !json.Valid(in) {
			t.Fatalf("doc %d: the generator made invalid JSON: %q", doc, in)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, in); err != nil {
			t.Fatal(err)
		}
		got := partialjson.Complete(in)
		var gotC bytes.Buffer
		if err := json.Compact(&gotC, got); err != nil || !bytes.Equal(gotC.Bytes(), want.Bytes()) {
			t.Fatalf("doc %d: Complete(%q) = %q, want %q modulo whitespace", doc, in, got, want.Bytes())
		}
		for i := range len(in) {
			p := partialjson.Complete(in[:i])
			if p != nil && !json.Valid(p) {
				t.Fatalf("doc %d: Complete(%q) = %q, not valid JSON", doc, in[:i], p)
			}
		}
	}
}

// TestAttackGarbage: random bytes and random mutations of valid
// documents (invalid UTF-8, control characters, stray brackets) always
// complete to valid JSON or nil, without panicking.
func TestAttackGarbage(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("{}[]\":,\\ tfn0123456789.eE+-u\x00\x1f\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xff\xfe\xed\xa0\x80")
	var b bytes.Buffer
	for range 20000 {
		b.Reset()
		if r.IntN(2) == 0 {
			for range r.IntN(40) {
				b.WriteByte(alphabet[r.IntN(len(alphabet))])
			}
		} else {
			randomJSON(r, &b, 4)
			in := b.Bytes()
			for range 1 + r.IntN(3) {
				if len(in) > 0 {
					in[r.IntN(len(in))] = alphabet[r.IntN(len(alphabet))]
				}
			}
		}
		in := b.Bytes()
		for i := 0; i <= len(in); i++ {
			if p := partialjson.Complete(in[:i]); p != nil && !json.Valid(p) {
				t.Fatalf("Complete(%q) = %q, not valid JSON", in[:i], p)
			}
		}
	}
}

// TestAttackPathological: inputs built to make a parser slow or deep
// finish in time linear in their length. Each runs against a budget far
// above what a linear pass needs (about 10 ns a byte) and far below what
// a quadratic one would (hours for these sizes).
func TestAttackPathological(t *testing.T) {
	const n = 1_000_000
	digits := strings.Repeat("1", n/2)
	for _, tc := range []struct {
		name  string
		in    string
		valid bool // the completion is not nil
	}{
		{"a million [", strings.Repeat("[", n), false},
		{"a million {", strings.Repeat(`{"a":`, n/5), false},
		{"nesting at the limit", `{"a":` + strings.Repeat("[", partialjson.MaxDepth-1) + `"x`, true},
		{"nesting past the limit", `{"a":` + strings.Repeat("[", partialjson.MaxDepth), false},
		{"a million quotes", strings.Repeat(`"`, n), false},
		{"a million quotes in an object", `{"a":` + strings.Repeat(`"`, n), false},
		{"a long string", `{"a":"` + strings.Repeat("x", n), true},
		{"long escapes", `{"a":"` + strings.Repeat(`\\`, n/2), true},
		{"long unicode escapes", `{"a":"` + strings.Repeat(`\u00e9`, n/6), true},
		{"a long key", `{"` + strings.Repeat("k", n), true},
		{"many members", `{` + strings.Repeat(`"a":1,`, n/6), true},
		{"many elements", `[` + strings.Repeat(`1,`, n/2), true},
		{"a long number", `{"a":` + strings.Repeat("9", n), true},
		// The number's longest valid prefix, searched for from the end.
		{"digits then a long invalid tail", `{"a":` + digits + strings.Repeat("+", n/2), true},
		{"digits, exponent, then a long invalid tail", `{"a":` + digits + "e" + strings.Repeat("-", n/2), true},
		{"digits, dot, then a long invalid tail", `{"a":1.` + digits + strings.Repeat(".", n/2), true},
		{"many multi-byte characters", `{"a":"` + strings.Repeat("😀", n/4), true},
		{"invalid UTF-8", `{"a":"` + strings.Repeat("\xff", n), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got := partialjson.Complete([]byte(tc.in))
			took := time.Since(start)
			if took > 2*time.Second {
				t.Fatalf("Complete took %v on %d bytes", took, len(tc.in))
			}
			if (got != nil) != tc.valid {
				t.Fatalf("Complete = %.60q (nil %v), want nil %v", got, got == nil, !tc.valid)
			}
			if got != nil && !json.Valid(got) {
				t.Fatalf("Complete = %.60q…, not valid JSON", got)
			}
		})
	}
}

// TestAttackNumberPrefix: a number cut short keeps exactly its longest
// valid prefix, whatever follows it in the same run of number bytes.
func TestAttackNumberPrefix(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`[123+++`, `[123]`},
		{`[1.5e-`, `[1.5]`},
		{`[1.5e-7.`, `[1.5e-7]`},
		{`[-0.0e`, `[-0.0]`},
		{`[0123`, `[0]`},
		{`[-`, `[]`},
		{`[--1`, `[]`},
		{`[1e5e5`, `[1e5]`},
		{`[7.`, `[7]`},
		{`[12E+3`, `[12E+3]`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := partialjson.Complete([]byte(tc.in)); string(got) != tc.want {
				t.Fatalf("Complete(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestAttackShowsNoMore: the completion of every prefix of a random
// document shows nothing the document does not say — no key it lacks,
// each string a prefix of its string, each number a prefix of its digits
// — and each completion extends the one of the prefix before.
func TestAttackShowsNoMore(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var b bytes.Buffer
	decode := func(in []byte) any {
		var v any
		d := json.NewDecoder(bytes.NewReader(in))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decode %q: %v", in, err)
		}
		return v
	}
	for doc := range 1500 {
		b.Reset()
		randomJSON(r, &b, 5)
		in := b.Bytes()
		want := decode(in)
		var prev any
		for i := 1; i <= len(in); i++ {
			p := partialjson.Complete(in[:i])
			if p == nil {
				continue
			}
			got := decode(p)
			if why := shows(got, want); why != "" {
				t.Fatalf("doc %d: Complete(%q) = %s, more than %s: %s", doc, in[:i], p, in, why)
			}
			if prev != nil {
				if why := shows(prev, got); why != "" {
					t.Fatalf("doc %d: Complete(%q) = %s does not extend the last completion: %s", doc, in[:i], p, why)
				}
			}
			prev = got
		}
	}
}

// shows explains how got says more than want, or returns "".
func shows(got, want any) string {
	switch g := got.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return "an object"
		}
		for k, v := range g {
			wv, ok := w[k]
			if !ok {
				return "key " + strconv.Quote(k)
			}
			if why := shows(v, wv); why != "" {
				return k + ": " + why
			}
		}
	case []any:
		w, ok := want.([]any)
		if !ok || len(g) > len(w) {
			return "an array"
		}
		for i := range g {
			if why := shows(g[i], w[i]); why != "" {
				return strconv.Itoa(i) + ": " + why
			}
		}
	case string:
		if w, ok := want.(string); !ok || !strings.HasPrefix(w, g) {
			return "string " + strconv.Quote(g)
		}
	case json.Number:
		if w, ok := want.(json.Number); !ok || !strings.HasPrefix(w.String(), g.String()) {
			return "number " + g.String()
		}
	default:
		if got != want {
			return "value"
		}
	}
	return ""
}

// TestAttackSurrogates: a UTF-16 surrogate pair's escape cut between its
// halves is dropped whole (its first half alone would show U+FFFD, which
// the final text does not have); a lone surrogate the text really holds
// is kept.
func TestAttackSurrogates(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"x\ud83d`, `{"a":"x"}`},
		{`{"a":"x\ud83d\`, `{"a":"x"}`},
		{`{"a":"x\ud83d\u`, `{"a":"x"}`},
		{`{"a":"x\uD83D\uDE0`, `{"a":"x"}`},
		{`{"a":"x\ud83d\ude00`, `{"a":"x\ud83d\ude00"}`},
		{`{"a":"x\ud83dA`, `{"a":"x\ud83dA"}`},
		{`{"a":"x\ud83d\n`, `{"a":"x\ud83d\n"}`},
		{`{"a":"x\udc00`, `{"a":"x\udc00"}`}, // a second half alone: nothing to wait for
		{`{"a":"x\u00e9`, `{"a":"x\u00e9"}`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := partialjson.Complete([]byte(tc.in)); string(got) != tc.want {
				t.Fatalf("Complete(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
