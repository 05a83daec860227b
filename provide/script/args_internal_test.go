package script

import (
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// argsSeeds are texts whose parse must equal JSON.parse's: the seed corpus
// of FuzzParseArgs and the cases of TestParseArgs.
var argsSeeds = []string{
	`{"a": 2, "b": 3}`, `0`, `-0`, `-0.0`, `1`, `-1`, `1.5`, `1e3`, `1E+3`, `1e-3`, `123456789012345678901234567890`,
	`9007199254740993`, `-9223372036854775808`, `9223372036854775807`, `1.7976931348623157e308`, `1e400`, `-1e400`, `1e-400`,
	`4.9e-324`, `0.1`, `01`, `1.`, `.5`, `-`, `+1`, `1e`, `1e+`, `0x10`, `NaN`, `Infinity`,
	`true`, `false`, `null`, `tru`, `nul`, `True`, `""`, `"a"`, `"\u00e9"`, `"é"`, `"\ud83d\ude00"`, `"😀"`,
	`"\ud800"`, `"\udc00"`, `"\ud800\ud800"`, `"\udc00\ud800"`, `"\ud800x"`, `"\ud800\u0041"`, `"\ud800\uZZZZ"`, `"\u12"`, `"\x"`,
	`"\"\\\/\b\f\n\r\t"`, "\"\x01\"", "\"\x7f\"", "\"a\xffb\"", "\"\xed\xa0\x80\"", "\xff", "\"\xc3\"", "[\"\xe2\x82\"]",
	`[]`, `[1, 2, [3, [4]]]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `]`, `{}`, `{"a":1,}`, `{"a" 1}`, `{a: 1}`, `{"a":1 "b":2}`, `{"a"}`, `{`,
	`{"a": 1, "a": 2}`, `{"a": 1, "b": 2, "a": 3}`, `{"__proto__": {"x": 1}}`, `{"__proto__": null}`, `{"constructor": 1, "toString": 2, "hasOwnProperty": 3}`,
	`{"2": "two", "b": 1, "1": "one", "-1": 0, "01": 1, "4294967295": 1, "4294967294": 1}`, `{"": ""}`, `{"é": 1, "😀": 2}`,
	" \t\r\n{ \"a\" : [ 1 , { } ] } \n", "\v1", "\u00a01", "\ufeff1", `1 2`, `{} {}`, `"a" "b"`, `1/**/`, `// c` + "\n1", ``, `   `,
	`[[[[[[[[[[]]]]]]]]]]`, `[{"a": [{"b": [null, true, false, "x", -1.5e-7]}]}]`,
}

// newTestCall returns a call whose runtime is prepared.
func newTestCall(t testing.TB) *call {
	t.Helper()
	g := Grants{}.withDefaults()
	c := newCall(g, newLimits(g), nil)
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	return c
}

// compareParse parses s with parseArgs and with the runtime's JSON.parse
// and fails t unless both fail or both give the same value.
func compareParse(t *testing.T, c *call, parse goja.Callable, s string) {
	t.Helper()
	got, gotErr := c.parseArgs(c.vm, s)
	ae, _ := gotErr.(*argsError)
	if deeperThan(s, maxNesting) {
		// parseArgs refuses what nests too deep, or fails on a syntax
		// error before it; JSON.parse, which recurses without a bound, is
		// not asked.
		if gotErr == nil {
			t.Fatalf("parseArgs(%.40q…) read text nested deeper than %d levels", s, maxNesting)
		}
		return
	}
	if ae != nil && ae.deep {
		t.Fatalf("parseArgs(%.40q…) refused as too deep text nested at most %d levels", s, maxNesting)
	}
	want, wantErr := parse(goja.Undefined(), c.vm.ToValue(s))
	switch {
	case gotErr != nil && wantErr != nil:
		return
	case gotErr != nil:
		t.Fatalf("parseArgs(%q) failed: %v; JSON.parse gave %v", s, gotErr, want)
	case wantErr != nil:
		t.Fatalf("parseArgs(%q) = %v; JSON.parse failed: %v", s, got, wantErr)
	}
	if msg := sameJSValue(c, got, want, "value"); msg != "" {
		t.Fatalf("parseArgs(%q) differs from JSON.parse: %s", s, msg)
	}
}

// sameJSValue compares two values as a script could: SameValue for
// primitives; for objects their class, prototype, own keys in order, each
// property's attributes and value.
func sameJSValue(c *call, a, b goja.Value, path string) string {
	ao, aIsObj := a.(*goja.Object)
	bo, bIsObj := b.(*goja.Object)
	if aIsObj != bIsObj {
		return path + ": " + a.String() + " against " + b.String()
	}
	if !aIsObj {
		if !a.SameAs(b) || describe(a) != describe(b) {
			return path + ": " + describe(a) + " " + a.String() + " against " + describe(b) + " " + b.String()
		}
		return ""
	}
	if ao.ClassName() != bo.ClassName() {
		return path + ": class " + ao.ClassName() + " against " + bo.ClassName()
	}
	if !ao.Prototype().SameAs(bo.Prototype()) {
		return path + ": different prototypes"
	}
	ak, bk := ao.GetOwnPropertyNames(), bo.GetOwnPropertyNames()
	if strings.Join(ak, "\x00") != strings.Join(bk, "\x00") {
		return path + ": keys " + strings.Join(ak, ",") + " against " + strings.Join(bk, ",")
	}
	if len(ao.Symbols()) != 0 || len(bo.Symbols()) != 0 {
		return path + ": symbol keys"
	}
	for _, k := range ak {
		for _, attr := range []string{"writable", "enumerable", "configurable"} {
			ad := object(c.invoke(c.in.ownDescriptor, goja.Undefined(), ao, c.vm.ToValue(k)))
			bd := object(c.invoke(c.in.ownDescriptor, goja.Undefined(), bo, c.vm.ToValue(k)))
			if ad.Get(attr).ToBoolean() != bd.Get(attr).ToBoolean() {
				return path + "." + k + ": " + attr + " differs"
			}
		}
		if msg := sameJSValue(c, ao.Get(k), bo.Get(k), path+"."+k); msg != "" {
			return msg
		}
	}
	return ""
}

func jsonParse(t testing.TB, c *call) goja.Callable {
	t.Helper()
	parse, ok := goja.AssertFunction(object(c.vm.GlobalObject().Get("JSON")).Get("parse"))
	if !ok {
		t.Fatal("JSON.parse is not a function")
	}
	return parse
}

// TestParseArgs compares parseArgs with JSON.parse on the seeds, and
// checks what the comparison cannot: its errors.
func TestParseArgs(t *testing.T) {
	c := newTestCall(t)
	parse := jsonParse(t, c)
	for _, s := range argsSeeds {
		t.Run(s, func(t *testing.T) { compareParse(t, c, parse, s) })
	}
	t.Run("nesting", func(t *testing.T) {
		for _, open := range []string{"[", `{"a":`} {
			closing := map[string]string{"[": "]", `{"a":`: "}"}[open]
			at := strings.Repeat(open, maxNesting) + "1" + strings.Repeat(closing, maxNesting)
			if _, err := c.parseArgs(c.vm, at); err != nil {
				t.Errorf("%d levels of %s: %v", maxNesting, open, err)
			}
			past := strings.Repeat(open, maxNesting) + "[]" + strings.Repeat(closing, maxNesting)
			if _, err := c.parseArgs(c.vm, past); err == nil || !err.(*argsError).deep {
				t.Errorf("%d levels of %s: %v, want the nesting refused", maxNesting+1, open, err)
			}
		}
	})
	errors := []struct{ text, msg string }{
		{``, "unexpected end of the text, where a value should be (at byte 0)"},
		{`{"a": 1,}`, "unexpected character '}', where a key (a string) should be (at byte 8)"},
		{`[1 2]`, "unexpected character '2', where a comma or a closing bracket should be (at byte 3)"},
		{`1e400`, "the number 1e400 is beyond the range of a float64 (at byte 0)"},
		{"\"a\x01\"", `unexpected control character '\x01' in a string (at byte 2)`},
		{`"\x"`, `invalid escape "\\x" in a string (at byte 2)`},
		{`{} x`, "unexpected character 'x' after the value (at byte 3)"},
		{`"abc`, "unexpected end of the text in a string (at byte 4)"},
	}
	for _, tc := range errors {
		t.Run("error "+tc.text, func(t *testing.T) {
			_, err := c.parseArgs(c.vm, tc.text)
			if err == nil || err.Error() != tc.msg {
				t.Fatalf("parseArgs(%q) error %v, want %q", tc.text, err, tc.msg)
			}
		})
	}
	t.Run("duplicate keys", func(t *testing.T) {
		v, err := c.parseArgs(c.vm, `{"a": 1, "b": 2, "a": 3}`)
		if err != nil {
			t.Fatal(err)
		}
		o := object(v)
		if k := strings.Join(o.Keys(), ","); k != "a,b" || o.Get("a").ToInteger() != 3 {
			t.Fatalf("keys %s, a = %v; want a,b and a = 3", k, o.Get("a"))
		}
	})
}

// FuzzParseArgs checks that parseArgs and goja's JSON.parse agree on any
// text: both fail, or both give the same value.
func FuzzParseArgs(f *testing.F) {
	for _, s := range argsSeeds {
		f.Add(s)
	}
	c := newTestCall(f)
	parse := jsonParse(f, c)
	f.Fuzz(func(t *testing.T, s string) { compareParse(t, c, parse, s) })
}
