package protocol

import (
	"encoding/json"
	"maps"
	"testing"
)

// TestObjectKeysScanMatchesTokens: the in-place key scan gives the same keys
// and the same verdict as the tokenizer, on what frames look like and on
// what hostile peers send.
func TestObjectKeysScanMatchesTokens(t *testing.T) {
	for _, doc := range scanCorpus {
		t.Run(doc, func(t *testing.T) { checkObjectKeys(t, []byte(doc)) })
	}
}

var scanCorpus = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,"b":2}`, `{"a":1,"a":2}`, `{"a":"}","b":"\"","c":"\\"}`,
	`{"v":2,"id":"c1","msg":{"type":"capability_result","callId":"x-1","result":{"n":7}}}`,
	`{"a":[1,{"b":[]},"]"],"c":{"d":{"e":null}},"f":true,"g":false,"h":-1.5e3}`,
	`{"a":1,"b":{"a":1,"a":2}}`, `{"\u0061":1,"a":2}`, `{"a\n":1}`, `{"é":1,"é":2}`, "{\"\xff\":1,\"\xfe\":2}",
	`[]`, `"s"`, `1`, `null`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{"a":1`, `{"a":tru}`, `{"a":1}}`, `{"a":"x}`,
	`{"a":[1,2}`, `{,}`, `{"a":1 "b":2}`, ``, ` `, `{"a":"\\"}`, `{"a":"\\\""}`, `{"a":{"b":"}"},"c":1}`,
}

func checkObjectKeys(t *testing.T, data []byte) {
	t.Helper()
	got, gotErr := objectKeys(data)
	want, wantErr := objectKeysTokens(data)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: scan error %v, tokenizer error %v", data, gotErr, wantErr)
	}
	if gotErr == nil && !maps.Equal(got, want) {
		t.Fatalf("%q: scan keys %v, tokenizer keys %v", data, got, want)
	}
	if gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: scan error %q, tokenizer error %q", data, gotErr, wantErr)
	}
}

// FuzzObjectKeys holds the scan to the tokenizer's answer on any bytes.
func FuzzObjectKeys(f *testing.F) {
	for _, doc := range scanCorpus {
		f.Add([]byte(doc))
	}
	f.Fuzz(checkObjectKeys)
}

// TestEncodeFrameEnvelope: the hand-built envelope is byte for byte what
// json.Marshal gives, for plain and for escaped ids.
func TestEncodeFrameEnvelope(t *testing.T) {
	msg := &CapabilityInvoked{CallID: "c-1", Name: "ui.echo", Input: []byte(`{"n":"<7>"}`), InvokedBy: InvokedByAgent}
	for _, f := range []Frame{
		{Msg: msg}, {V: 2, Seq: 17, Msg: msg}, {ID: "c1", Msg: &Ack{}}, {Seq: 3, Ref: "r-9", Msg: &ErrorReply{Code: CodeConflict, Message: "a & b"}},
		{ID: `a"b`, Msg: &Ack{}}, {Ref: "<x>", Msg: &Ack{}}, {ID: "é", Msg: &Ack{}}, {ID: "\x00", Msg: &Ack{}}, {Ref: "a\\b", Msg: &Ack{}},
	} {
		got, err := EncodeFrame(&f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := EncodeMessage(f.Msg)
		if err != nil {
			t.Fatal(err)
		}
		v := f.V
		if v == 0 {
			v = Version
		}
		want, err := json.Marshal(frameJSON{V: v, Seq: f.Seq, ID: f.ID, Ref: f.Ref, Msg: m})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("EncodeFrame = %s, json.Marshal = %s", got, want)
		}
	}
}
