package session

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastSeedSchemas are schemas of the fast subset and just outside it.
var fastSeedSchemas = []string{
	`{"type":"object","properties":{"text":{"type":"string","maxLength":20}},"required":["text"],"additionalProperties":false}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":10},"x":{"type":"number","minimum":-1.5},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"maxItems":2,"minItems":1}}}`,
	`{"type":["string","null"],"minLength":2}`,
	`{"properties":{"a":true,"b":false},"additionalProperties":{"type":"boolean"}}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["path"],"description":"d","title":"t"}`,
	`{"type":"object","properties":{"o":{"type":"object","properties":{"deep":{"type":"array","items":{"type":"object","required":["k"]}}}}}}`,
	`{"type":"string","pattern":"^a"}`,
	`{"type":"integer","maximum":3}`,
	`true`, `false`, `{}`,
}

var fastSeedInputs = []string{
	`{"text":"hi"}`, `{"text":"héllo wörld"}`, `{"text":"\u00e9"}`, `{"text":1}`, `{}`, `{"text":"hi","x":1}`,
	`{"text":"aaaaaaaaaaaaaaaaaaaaa"}`, `{"n":3,"x":-1.5,"tags":["a"]}`, `{"n":3.0}`, `{"n":11}`, `{"n":-0}`, `{"n":1e1}`,
	`{"tags":[]}`, `{"tags":["a","b","a"]}`, `{"tags":["c"]}`, `null`, `"ab"`, `"a"`, `"\ud83d\ude00x"`, `{"a":1,"b":1}`, `{"a":1,"c":true}`,
	`{"c":"x"}`, `{"path":"p"}`, `{"o":{"deep":[{"k":1},{"j":2}]}}`, `{"o":{"deep":[{"k":1}]}}`, `[1,2]`, `3`, `4`, `2.5`,
	`{"text":"hi","text":1}`, `{"text":1,"text":"hi"}`, " {\"text\" : \"hi\" } ", `{"te\u0078t":"hi"}`, `123456789012345678901234567890`,
}

// TestFastSchemaAgrees: wherever the fast validator says valid, the full
// validator agrees; and it does say valid for the inputs of its subset.
func TestFastSchemaAgrees(t *testing.T) {
	accepted := 0
	for _, sch := range fastSeedSchemas {
		for _, in := range fastSeedInputs {
			if checkFastAgrees(t, sch, in) {
				accepted++
			}
		}
	}
	if accepted < 40 {
		t.Errorf("the fast path accepted only %d of the seed cases: it is not being used", accepted)
	}
	s, err := CompileSchema(json.RawMessage(fastSeedSchemas[0]))
	if err != nil || s.fast == nil {
		t.Fatalf("the echo schema has no fast validator (%v)", err)
	}
	if s, _ := CompileSchema(json.RawMessage(`{"type":"string","pattern":"^a"}`)); s.fast != nil {
		t.Error("a schema with pattern got a fast validator")
	}
}

// checkFastAgrees reports whether the fast path accepted in, failing if the
// full validator disagrees.
func checkFastAgrees(t testing.TB, schema, in string) bool {
	s, err := CompileSchema(json.RawMessage(schema))
	if err != nil || s.fast == nil || !json.Valid([]byte(in)) {
		return false
	}
	if !s.fast.valid([]byte(in)) {
		return false
	}
	v, err := decodeJSON([]byte(in))
	if err != nil {
		t.Fatalf("fast accepted %s for %s, which does not decode: %v", in, schema, err)
	}
	if err := s.s.Validate(v); err != nil {
		t.Fatalf("fast accepted %s for %s; the validator says %v", in, schema, err)
	}
	return true
}

// FuzzFastSchema: the differential test over fuzzed schemas and inputs.
func FuzzFastSchema(f *testing.F) {
	for _, sch := range fastSeedSchemas {
		for _, in := range fastSeedInputs[:8] {
			f.Add(sch, in)
		}
	}
	f.Fuzz(func(t *testing.T, schema, in string) {
		if len(schema) > 4096 || len(in) > 4096 {
			return
		}
		if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(schema))); err != nil || doc == nil {
			return
		}
		checkFastAgrees(t, schema, in)
	})
}
