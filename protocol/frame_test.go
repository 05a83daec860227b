package protocol_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
)

var update = flag.Bool("update", false, "rewrite golden files from the encoder")

// TestGoldenRoundTrip decodes every fixture and encodes it again: the bytes
// must be the fixture's, compacted. Every message type has a fixture.
func TestGoldenRoundTrip(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.json")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[protocol.Type]bool{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, raw); err != nil {
				t.Fatalf("fixture is not JSON: %v", err)
			}
			f, err := protocol.DecodeFrame(raw)
			if err != nil {
				t.Fatalf("DecodeFrame: %v", err)
			}
			covered[f.Msg.MessageType()] = true
			got, err := protocol.EncodeFrame(f)
			if err != nil {
				t.Fatalf("EncodeFrame: %v", err)
			}
			if *update {
				var pretty bytes.Buffer
				_ = json.Indent(&pretty, got, "", " ")
				_ = os.WriteFile(file, append(pretty.Bytes(), '\n'), 0o644)
				return
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("round trip changed the frame\n got: %s\nwant: %s", got, want.Bytes())
			}
		})
	}
	for _, typ := range []protocol.Type{
		protocol.TypeCapabilityRegister, protocol.TypeCapabilityDeregister, protocol.TypeCapabilityResult,
		protocol.TypeCapabilityApprove, protocol.TypeCapabilityInvoked, protocol.TypeRenderInvoked,
		protocol.TypeCapabilityInvoke, protocol.TypeCapabilityCancel, protocol.TypeCapabilityProgress, protocol.TypeApprovalRequested,
		protocol.TypeCapabilityOutcome, protocol.TypeResume, protocol.TypeSnapshot, protocol.TypeAck, protocol.TypeError,
		protocol.TypeApprovalDecided, protocol.TypeApprovalWithdrawn,
	} {
		if !covered[typ] {
			t.Errorf("no golden fixture for message type %q", typ)
		}
	}
}

// TestDecodeFrameErrors: every malformed frame is an error that names what
// was wrong.
func TestDecodeFrameErrors(t *testing.T) {
	const okCap = `{"name":"a","description":"d","inputSchema":{},"side":"client","origin":%s}`
	reg := func(origin string) string {
		return `{"v":2,"msg":{"type":"capability_register","capabilities":[` + strings.Replace(okCap, "%s", origin, 1) + `]}}`
	}
	tests := []struct {
		name, frame, want string
	}{
		{"not json", `{`, "invalid JSON: unexpected end of JSON input"},
		{"not an object", `[1]`, "want a JSON object, got an array"},
		{"null", `null`, "want a JSON object, got null"},
		{"wrong version", `{"v":1,"msg":{"type":"ack"}}`, "unsupported protocol version 1"},
		{"missing version", `{"msg":{"type":"ack"}}`, `missing required field "v"`},
		{"missing msg", `{"v":2}`, `missing required field "msg"`},
		{"unknown envelope field", `{"v":2,"msg":{"type":"ack"},"extra":1}`, `unknown field "extra"`},
		{"case-folded envelope field", `{"V":2,"msg":{"type":"ack"}}`, `unknown field "V"`},
		{"duplicate field", `{"v":2,"v":2,"msg":{"type":"ack"}}`, `duplicate field "v"`},
		{"msg not object", `{"v":2,"msg":"x"}`, "msg: want a JSON object"},
		{"missing type", `{"v":2,"msg":{}}`, "type: missing"},
		{"unknown type", `{"v":2,"msg":{"type":"capability_explode"}}`, `unknown message type "capability_explode"`},
		{"unknown msg field", `{"v":2,"msg":{"type":"capability_deregister","names":[],"force":true}}`, `unknown field "force"`},
		{"missing msg field", `{"v":2,"msg":{"type":"capability_result","callId":"c"}}`, `missing required field "result"`},
		{"wrong field type", `{"v":2,"msg":{"type":"capability_deregister","names":"a"}}`, "cannot unmarshal string"},
		{"misspelt requiresApproval", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"requiresAproval":true}]}}`, `unknown field "requiresAproval"`},
		{"case-folded capability field", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"RequiresApproval":false}]}}`, `unknown field "RequiresApproval"`},
		{"capability missing description", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","inputSchema":{},"side":"client","origin":{"kind":"client"}}]}}`, `missing required field "description"`},
		{"origin unknown kind", reg(`{"kind":"alien"}`), `origin.kind: unknown kind "alien"`},
		{"origin missing kind", reg(`{}`), `origin.kind: missing`},
		{"origin flow without flowId", reg(`{"kind":"flow"}`), `origin.flowId: required for kind "flow"`},
		{"origin skill without skillId", reg(`{"kind":"skill"}`), `origin.skillId: required`},
		{"origin mcp without serverId", reg(`{"kind":"mcp"}`), `origin.serverId: required`},
		{"origin connector without connectorId", reg(`{"kind":"connector"}`), `origin.connectorId: required`},
		{"origin mount without mountId", reg(`{"kind":"mount"}`), `origin.mountId: required`},
		{"origin app without appId", reg(`{"kind":"app"}`), `origin.appId: required`},
		{"origin app with empty appId", reg(`{"kind":"app","appId":""}`), `origin.appId: must not be empty`},
		{"origin app with numeric appId", reg(`{"kind":"app","appId":7}`), `origin.appId: want a string`},
		{"origin foreign id", reg(`{"kind":"client","appId":"x"}`), `origin.appId: not a field of kind "client"`},
		// Several faults: the first in sorted order, every time (the fields
		// were read from a map, and the error changed from run to run).
		{"origin two foreign fields", reg(`{"kind":"client","B09":"","7":""}`), `origin.7: not a field of kind "client"`},
		{"render source two unknown fields", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"render":{"source":{"kind":"iframe","url":"https://x","zz":1,"aa":2},"targets":["chat"]}}]}}`, `render.source.aa: not a field of kind "iframe"`},
		{"render source unknown kind", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"render":{"source":{"kind":"canvas","url":"https://x"},"targets":["chat"]}}]}}`, `render.source.kind: unknown kind "canvas"`},
		{"render web-component without tagName", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"render":{"source":{"kind":"web-component","url":"https://x"},"targets":["chat"]}}]}}`, `render.source.tagName: required`},
		{"render iframe with tagName", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"render":{"source":{"kind":"iframe","url":"https://x","tagName":"x-y"},"targets":["chat"]}}]}}`, `render.source.tagName: not a field of kind "iframe"`},
		{"render without targets", `{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"render":{"source":{"kind":"iframe","url":"https://x"}}}]}}`, `missing required field "targets"`},
		{"outcome ok with error", `{"v":2,"seq":1,"msg":{"type":"capability_outcome","callId":"c","name":"n","outcome":{"ok":true,"error":{"code":"x","message":""}}}}`, "ok true wants exactly ok and value"},
		{"too large", `{"v":2,"msg":{"type":"ack","callId":"` + strings.Repeat("x", protocol.MaxFrameBytes) + `"}}`, "more than the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := protocol.DecodeFrame([]byte(tt.frame))
			if err == nil {
				t.Fatalf("DecodeFrame accepted %s", tt.frame)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestDecodeErrorKeepsID: a frame whose message is bad still yields its id,
// so the error reply can refer to it.
func TestDecodeErrorKeepsID(t *testing.T) {
	_, err := protocol.DecodeFrame([]byte(`{"v":2,"id":"q9","msg":{"type":"nope"}}`))
	de, ok := err.(*protocol.DecodeError)
	if !ok || de.ID != "q9" {
		t.Fatalf("got %#v, want a *DecodeError with ID q9", err)
	}
}

func TestEncodeMessageTypeFirst(t *testing.T) {
	b, err := protocol.EncodeMessage(&protocol.Ack{})
	if err != nil || string(b) != `{"type":"ack"}` {
		t.Fatalf("EncodeMessage(Ack{}) = %s, %v", b, err)
	}
	b, err = protocol.EncodeMessage(&protocol.Resume{AfterSeq: 4})
	if err != nil || string(b) != `{"type":"resume","afterSeq":4}` {
		t.Fatalf("EncodeMessage(Resume) = %s, %v", b, err)
	}
}

func TestResultError(t *testing.T) {
	tests := []struct {
		name, result string
		msg          string
		code         protocol.Code
		isErr        bool
	}{
		{"value", `{"x":1}`, "", "", false},
		{"null", `null`, "", "", false},
		{"string", `"error"`, "", "", false},
		{"error envelope", `{"error":"boom"}`, "boom", "", true},
		{"error with code", `{"error":"slow down","code":"rate_limited"}`, "slow down", "rate_limited", true},
		{"error with bad code", `{"error":"x","code":"Not A Code"}`, "x", "", true},
		{"error not a string", `{"error":{"m":1}}`, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, code, ok := protocol.ResultError(json.RawMessage(tt.result))
			if msg != tt.msg || code != tt.code || ok != tt.isErr {
				t.Errorf("ResultError(%s) = %q, %q, %v; want %q, %q, %v", tt.result, msg, code, ok, tt.msg, tt.code, tt.isErr)
			}
		})
	}
}

// FuzzDecodeFrame: no input makes DecodeFrame panic, and whatever it accepts
// encodes and decodes again to the same frame.
func FuzzDecodeFrame(f *testing.F) {
	files, _ := filepath.Glob("testdata/golden/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Add([]byte(`{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"app","appId":"x"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := protocol.DecodeFrame(data)
		if err != nil {
			return
		}
		enc, err := protocol.EncodeFrame(fr)
		if err != nil {
			return // a decoded zero-value union (for example an empty origin) may refuse to encode
		}
		fr2, err := protocol.DecodeFrame(enc)
		if err != nil {
			t.Fatalf("re-decoding our own encoding failed: %v\n%s", err, enc)
		}
		enc2, err := protocol.EncodeFrame(fr2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// TestDecodeErrorRef: whenever the frame's top-level "id" is a readable
// string, the error carries it — also when the version is unknown or
// missing, when msg is missing, when the envelope has an unknown field,
// and when the JSON breaks after the id.
func TestDecodeErrorRef(t *testing.T) {
	tests := []struct {
		name, frame, wantID string
		wantCode            protocol.Code
	}{
		{"unknown v", `{"v":7,"id":"a1","msg":{"type":"ack"}}`, "a1", protocol.CodeInvalidRequest},
		{"no v", `{"id":"a2","msg":{"type":"ack"}}`, "a2", protocol.CodeInvalidRequest},
		{"no msg", `{"v":2,"id":"a3"}`, "a3", protocol.CodeInvalidRequest},
		{"unknown envelope field", `{"v":2,"id":"a4","msg":{"type":"ack"},"x":1}`, "a4", protocol.CodeInvalidRequest},
		{"bad message", `{"v":2,"id":"a5","msg":{"type":"nope"}}`, "a5", protocol.CodeInvalidRequest},
		{"id not a string", `{"v":7,"id":5,"msg":{"type":"ack"}}`, "", protocol.CodeInvalidRequest},
		{"id case-folded", `{"v":7,"ID":"a6","msg":{"type":"ack"}}`, "", protocol.CodeInvalidRequest},
		{"id twice", `{"v":2,"id":"a7","id":"a8","msg":{"type":"ack"}}`, "", protocol.CodeInvalidRequest},
		// JSON that breaks after the id (cut short, nested deeper than
		// the decoder follows): the id is read up to the break.
		{"not JSON", `{"v":2,"id":"a9"`, "a9", protocol.CodeInvalidRequest},
		{"nested too deep", `{"v":2,"id":"d1","msg":{"type":"capability_result","callId":"c","result":` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}}`, "d1", protocol.CodeInvalidRequest},
		{"broken before the id", `{"v":2,"x":[,"id":"a0"}`, "", protocol.CodeInvalidRequest},
		{"too large", `{"v":2,"id":"b1","msg":{"type":"ack","x":"` + strings.Repeat("x", protocol.MaxFrameBytes) + `"}}`, "", protocol.CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := protocol.DecodePeerFrame([]byte(tt.frame))
			de, ok := err.(*protocol.DecodeError)
			if !ok {
				t.Fatalf("got %v, want a *DecodeError", err)
			}
			if de.ID != tt.wantID || de.Code != tt.wantCode {
				t.Errorf("ID %q code %q, want %q %q (%v)", de.ID, de.Code, tt.wantID, tt.wantCode, err)
			}
		})
	}
}

// TestDecodePeerFrameKernelFields: a peer's frame carrying seq or ref is
// refused with an error naming the field; DecodeFrame, used on what the
// kernel sends, accepts both.
func TestDecodePeerFrameKernelFields(t *testing.T) {
	tests := []struct {
		name, frame, want string
	}{
		{"seq", `{"v":2,"id":"p1","seq":4,"msg":{"type":"capability_deregister","names":[]}}`, "seq: set by the kernel only"},
		{"seq zero", `{"v":2,"id":"p1","seq":0,"msg":{"type":"capability_deregister","names":[]}}`, "seq: set by the kernel only"},
		{"ref", `{"v":2,"id":"p1","ref":"k","msg":{"type":"capability_deregister","names":[]}}`, "ref: set by the kernel only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := protocol.DecodePeerFrame([]byte(tt.frame))
			de, ok := err.(*protocol.DecodeError)
			if !ok || !strings.Contains(err.Error(), tt.want) || de.ID != "p1" || de.Code != protocol.CodeInvalidRequest {
				t.Fatalf("DecodePeerFrame = %#v, want an invalid_request naming %q with ID p1", err, tt.want)
			}
			if _, err := protocol.DecodeFrame([]byte(tt.frame)); err != nil {
				t.Errorf("DecodeFrame refused a kernel frame: %v", err)
			}
		})
	}
	if _, err := protocol.DecodePeerFrame([]byte(`{"v":2,"id":"p2","msg":{"type":"capability_deregister","names":[]}}`)); err != nil {
		t.Errorf("DecodePeerFrame refused a plain command: %v", err)
	}
}

// FuzzDecodePeerFrame: no input makes DecodePeerFrame panic; whatever it
// accepts carries neither seq nor ref, and a refusal is a *DecodeError
// with a code.
func FuzzDecodePeerFrame(f *testing.F) {
	f.Add([]byte(`{"v":2,"id":"a","msg":{"type":"capability_deregister","names":[]}}`))
	f.Add([]byte(`{"v":2,"id":"a","seq":1,"msg":{"type":"ack"}}`))
	f.Add([]byte(`{"v":7,"id":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := protocol.DecodePeerFrame(data)
		if err != nil {
			de, ok := err.(*protocol.DecodeError)
			if !ok || de.Code == "" {
				t.Fatalf("refusal %#v is not a *DecodeError with a code", err)
			}
			return
		}
		if fr.Seq != 0 || fr.Ref != "" {
			t.Fatalf("accepted a peer frame with seq %d ref %q", fr.Seq, fr.Ref)
		}
	})
}
