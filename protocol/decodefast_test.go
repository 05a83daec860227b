package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fastCorpus is what the fast paths must agree with the strict ones on:
// every golden frame, as written and as the kernel writes it (with a seq,
// an id, a ref), and envelopes that come close to the kernel's shape.
func fastCorpus(t testing.TB) [][]byte {
	files, err := filepath.Glob("testdata/golden/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("golden frames: %v", err)
	}
	var out [][]byte
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
		f, err := DecodeFrame(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, g := range []Frame{{Seq: 1, Msg: f.Msg}, {Seq: 18446744073709551615, ID: "c-1", Msg: f.Msg}, {Seq: 7, Ref: "r 1", Msg: f.Msg}, {ID: "x", Ref: "y", Msg: f.Msg}} {
			b, err := AppendFrame(nil, &g)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	for _, s := range []string{
		`{"v":2,"seq":1,"msg":{"type":"ack"}}`,
		`{"v":2,"seq":0,"msg":{"type":"ack"}}`,
		`{"v":2,"seq":01,"msg":{"type":"ack"}}`,
		`{"v":2,"seq":18446744073709551616,"msg":{"type":"ack"}}`,
		`{"v":2,"seq":-1,"msg":{"type":"ack"}}`,
		`{"v":2,"seq":1.5,"msg":{"type":"ack"}}`,
		`{"v":2,"seq":1,"seq":2,"msg":{"type":"ack"}}`,
		`{"v":2,"seq":1,"msg":{"type":"ack"},"x":1}`,
		`{"v":2,"seq":1,"msg":{"type":"ack"},"msg":{"type":"ack"}}`,
		`{"v":2,"seq":1,"msg":{"type":"ack"} }`,
		`{"v":2,"seq":1,"msg": {"type":"ack"}}`,
		`{"v":2,"seq":1,"msg":{"type":"ack"}}` + "\n",
		`{"v":2,"id":"a\"b","msg":{"type":"ack"}}`,
		`{"v":2,"id":"a\\b","msg":{"type":"ack"}}`,
		`{"v":2,"id":"é","msg":{"type":"ack"}}`,
		`{"v":2,"id":"","msg":{"type":"ack"}}`,
		`{"v":2,"ref":"r","id":"i","msg":{"type":"ack"}}`,
		`{"v":2,"id":1,"msg":{"type":"ack"}}`,
		`{"v":20,"msg":{"type":"ack"}}`,
		`{"v":2.0,"msg":{"type":"ack"}}`,
		`{"v":2,"msg":null}`,
		`{"v":2,"msg":[]}`,
		`{"v":2,"msg":{"type":"ack","type":"ack"}}`,
		`{"v":2,"msg":{"TYPE":"ack"}}`,
		`{"v":2,"msg":{"Type":"ack","type":"ack"}}`,
		`{"v":2,"msg":{"type":"a\u0063k"}}`,
		`{"v":2,"msg":{"type":"ack","x":1}}`,
		`{"v":2,"msg":{"type":null}}`,
		`{"v":2,"msg":{"type":1}}`,
		`{"v":2,"msg":{"type":"no_such_type"}}`,
		`{"v":2,"msg":{"type":"capability_deregister"}}`,
		`{"v":2,"msg":{"type":"capability_deregister","names":"x"}}`,
		`{"v":2,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true}}}`,
		`{"v":2,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":1}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","input":{"a":[1,{"b":"x\"y"}]},"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"invokedBy":"agent","input": { "a" : 1 } ,"name":"n","callId":"c","type":"capability_invoked"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","input":null,"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","input":"s","invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","input":7,"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c\u0041","name":"n","input":{},"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","callId":"d","name":"n","input":{},"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","input":{},"input":{},"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","Input":{},"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"","name":"","input":{},"invokedBy":""}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":1,"name":"n","input":{},"invokedBy":"agent"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_result","callId":"c","result":"capability_invoked"}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"c","name":"n","input":{},"invokedBy":"agent","x":1}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":{"t":"a\nb"}}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"value":[1,2] , "ok":true}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":null}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":"true","value":1}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"ok":true,"value":1}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":1,"error":{"code":"x","message":"y"}}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":false,"error":{"code":"timeout","message":"m"}}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":1},"outcome":{"ok":true,"value":2}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":1}} }`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":[]}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":"\u00e9"}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"value":1.5e3}}}`,
		`{"v":2,"seq":1,"msg":{"type":"capability_outcome","name":"n","outcome":{"ok":true,"value":1}}}`,
		`{"v":2,"msg":{"type":"ack"}},{"type":"ack"}}`,
		`{"v":2,"msg":{"type":"ack"},"v":2,"msg":{"type":"ack"}}`,
		`{"v":2,"msg":`,
		`{"v":2,}`,
		`{"v":2,"msg":{}}}`,
	} {
		out = append(out, []byte(s))
	}
	// Invalid UTF-8 inside a call's input: valid JSON to encoding/json,
	// not taken by the one-pass path.
	out = append(out, []byte("{\"v\":2,\"seq\":1,\"msg\":{\"type\":\"capability_invoked\",\"callId\":\"c\",\"name\":\"n\",\"input\":\"\xff\",\"invokedBy\":\"agent\"}}"))
	return out
}

// checkFast fails unless DecodeFrame and DecodeMessage give what their
// strict paths give on data — the same value or the same error — and the
// fast paths accept only what the strict ones accept, with the same result.
func checkFast(t *testing.T, data []byte) {
	t.Helper()
	got, gotErr := DecodeFrame(data)
	want, _, wantErr := decodeFrameWith(data, decodeMessageStrict)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: DecodeFrame error %v, strict %v", data, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: DecodeFrame %+v, strict %+v", data, got, want)
	}
	if f, ok := decodeFrameFast(data); ok && (wantErr != nil || !reflect.DeepEqual(f, want)) {
		t.Fatalf("%q: the fast path decodes %+v, strict %+v, %v", data, f, want, wantErr)
	}
	// The message alone, when data holds one.
	var fj struct {
		Msg json.RawMessage `json:"msg"`
	}
	msgs := [][]byte{data}
	if json.Unmarshal(data, &fj) == nil && len(fj.Msg) > 0 {
		msgs = append(msgs, fj.Msg)
	}
	for _, m := range msgs {
		got, gotErr := DecodeMessage(m)
		want, wantErr := decodeMessageStrict(m)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: DecodeMessage %+v, %v; strict %+v, %v", m, got, gotErr, want, wantErr)
		}
	}
}

// TestDecodeFast: on the corpus, the fast paths agree with the strict
// ones, and kernel frames take them.
func TestDecodeFast(t *testing.T) {
	for _, data := range fastCorpus(t) {
		checkFast(t, data)
	}
	for _, s := range []string{`{"v":2,"seq":1,"msg":{"type":"ack"}}`, `{"v":2,"seq":3,"ref":"r-9","msg":{"type":"error","code":"conflict","message":"a"}}`} {
		if _, ok := decodeFrameFast([]byte(s)); !ok {
			t.Errorf("%s: not decoded by the fast path", s)
		}
	}
	b, err := AppendFrame(nil, &Frame{Seq: 42, Msg: &CapabilityInvoked{CallID: "c-1", Name: "fs.read", Input: json.RawMessage(`{"path":"a"}`), InvokedBy: InvokedByAgent}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeFrameFast(b); !ok {
		t.Errorf("%s: a journaled event not decoded by the fast path", b)
	}
	if !bytes.HasPrefix(b, []byte(`{"v":2,"seq":42,"msg":`)) {
		t.Errorf("AppendFrame wrote %s: the fast path's shape changed", b)
	}
}

// FuzzDecodeFast holds DecodeFrame and DecodeMessage, fast paths
// included, to their strict paths' answers on any bytes.
func FuzzDecodeFast(f *testing.F) {
	for _, data := range fastCorpus(f) {
		f.Add(data)
	}
	f.Fuzz(checkFast)
}

// BenchmarkDecodeFrame decodes journaled events (a call and its outcome,
// as a wake reads them) through DecodeFrame and through the strict path
// alone.
func BenchmarkDecodeFrame(b *testing.B) {
	for _, ev := range []struct {
		name string
		msg  Message
	}{
		{"invoked", &CapabilityInvoked{CallID: "cq3k5x7m2-42", Name: "fs.read", Input: json.RawMessage(`{"path":"notes/todo.md","maxBytes":65536}`), InvokedBy: InvokedByAgent}},
		{"outcome", &CapabilityOutcome{CallID: "cq3k5x7m2-42", Name: "fs.read", Outcome: OK(json.RawMessage(`{"text":"- buy milk\n- write the wake benchmark"}`))}},
	} {
		data, err := AppendFrame(nil, &Frame{Seq: 1017, Msg: ev.msg})
		if err != nil {
			b.Fatal(err)
		}
		for _, path := range []struct {
			name   string
			decode func([]byte) error
		}{
			{"DecodeFrame", func(d []byte) error { _, err := DecodeFrame(d); return err }},
			{"strict", func(d []byte) error { _, _, err := decodeFrameWith(d, decodeMessageStrict); return err }},
		} {
			b.Run(ev.name+"/"+path.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := path.decode(data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
