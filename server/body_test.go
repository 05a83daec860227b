package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeStrict: decodeStrict ends on any bytes, and takes what
// encoding/json takes unless a key appears twice, the value nests too
// deep, or bytes follow it. A value cut short inside an array or object
// spun its duplicate-key walk for ever (a lifecycle probe: `[{"a":"b`).
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{`{"id":"a"}`, `[{"a":"b`, `{"id":["x`, `{"a":{"b":`, `[[[`, `{"a":1,"a":2}`, `{"a"`, `{"a":1}{}`, `[1,2`, `{`, `[`, `{"a":[1,{"b":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict, plain any
		err := decodeStrict(data, &strict)
		if err == nil && json.Unmarshal(data, &plain) != nil {
			t.Fatalf("decodeStrict took %q, which encoding/json refuses", data)
		}
	})
}

// TestDecodeStrictCutShort: a body cut short inside an array or object is
// refused as the decoder refuses it (it was never answered); an empty one
// says so, not "EOF" (the re-probe: an empty tokens.json).
func TestDecodeStrictCutShort(t *testing.T) {
	var e any
	if err := decodeStrict([]byte(" \n"), &e); err == nil || err.Error() != "empty: want a JSON object" {
		t.Errorf("empty: %v", err)
	}
	for _, s := range []string{`[{"a":"b`, `{"id":["x`, `{"a":{"b":`, `{"a":[1,{"b":`} {
		var v any
		if err := decodeStrict([]byte(s), &v); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
			t.Errorf("%s: %v, want the decoder's unexpected EOF", s, err)
		}
	}
}

// TestDecodeStrictKeysInAnotherCase: encoding/json matches a key to a
// field without regard to case and takes the last, so a key repeated in
// another case is one key twice: {"side":"client","Side":"operator"} made
// a client token an operator's, {"id":"a","ID":"b"} made session b (an
// adversarial probe). Each is refused, naming both spellings.
func TestDecodeStrictKeysInAnotherCase(t *testing.T) {
	var tok struct{ Side, Tenant string }
	for _, s := range []string{`{"side":"client","Side":"operator"}`, `{"tenant":"a","TENANT":"b"}`, `{"side":"client","ſide":"operator"}`} {
		if err := decodeStrict([]byte(s), &tok); err == nil || !strings.Contains(err.Error(), "without regard to case") {
			t.Errorf("%s: %v (decoded %+v), want the keys refused as one key twice", s, err, tok)
		}
	}
	var id struct{ ID string }
	if err := decodeStrict([]byte(`{"id":"a","ID":"b"}`), &id); err == nil || !strings.Contains(err.Error(), `"id" and "ID"`) {
		t.Errorf(`{"id":"a","ID":"b"}: %v (decoded %+v)`, err, id)
	}
	if err := decodeStrict([]byte(`{"Side":"client"}`), &tok); err != nil || tok.Side != "client" { // one key, in any case, as before
		t.Errorf(`{"Side":"client"}: %v %+v`, err, tok)
	}
}
