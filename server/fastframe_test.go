package server

import (
	"reflect"
	"testing"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
)

// resultFrameSeeds are frames around the fast path's edges.
var resultFrameSeeds = []string{
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":{"n":7}}}`,
	`{"v":2,"id":"r1","msg":{"type":"capability_result","callId":"c1","result":{"n":[1,{"a":"}"}]}}}`,
	` { "msg" : { "result" : "x\"y" , "callId" : "c-9" , "type" : "capability_result" } , "v" : 2 , "id" : "" } `,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":null}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":12.5e3}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":{"error":"no"}}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":[ 1 , 2 ]}}`,
	// Not taken by the fast path: the strict decoder answers.
	`{"v":2,"msg":{"type":"capability_result","callId":"c1"}}`,
	`{"v":2,"msg":{"type":"capability_result","result":1}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":1,"extra":1}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":1,"result":2}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","callId":"c2","result":2}}`,
	`{"v":2,"msg":{"Type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"msg":{"type":"capability_resul\u0074","callId":"c1","result":1}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c\u00e9","result":1}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"cé","result":1}}`,
	`{"v":2,"msg":{"type":"capability_invoked","callId":"c1","name":"x","input":{}}}`,
	`{"v":2.0,"msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":1,"msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":"2","msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"v":2,"msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"seq":3,"msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"ref":"x","msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"id":"a","id":"b","msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"id":null,"msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"ID":"a","msg":{"type":"capability_result","callId":"c1","result":1}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":1},"msg":{}}`,
	`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":1}`,
	`{"v":2,"msg":[]}`,
	`{"v":2}`,
	`[]`,
	`"x"`,
	``,
}

// TestDecodeResultFrame: what the fast path takes decodes exactly as the
// strict decoder decodes it, and the frames it must not take go to the
// strict decoder.
func TestDecodeResultFrame(t *testing.T) {
	taken := map[string]bool{}
	for _, s := range resultFrameSeeds[:7] {
		taken[s] = true
	}
	for _, s := range resultFrameSeeds {
		t.Run(s, func(t *testing.T) {
			_, ok := decodeResultFrame([]byte(s))
			if ok != taken[s] {
				t.Fatalf("fast path took it: %v, want %v", ok, taken[s])
			}
			checkSameFrame(t, []byte(s))
		})
	}
}

// checkSameFrame fails when the fast path takes data and decodes it
// otherwise than protocol.DecodePeerFrame.
func checkSameFrame(t *testing.T, data []byte) {
	t.Helper()
	f, ok := decodeResultFrame(data)
	want, err := protocol.DecodePeerFrame(data)
	if !ok {
		return // decodePeerFrame is DecodePeerFrame then
	}
	if err != nil {
		t.Fatalf("fast path took %q, which the strict decoder refuses: %v", data, err)
	}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("fast path decoded %q as %+v %+v, strict as %+v %+v", data, f, f.Msg, want, want.Msg)
	}
}

// FuzzDecodeResultFrame holds the fast path to the strict decoder on any
// bytes.
func FuzzDecodeResultFrame(f *testing.F) {
	for _, s := range resultFrameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameFrame(t, data)
		if ok := len(data) > 0; ok {
			_, _ = decodeResultFrame(data[:len(data)/2]) // a prefix never panics
		}
	})
}

// TestDecodeResultFrameCopies: the result does not alias the frame's
// buffer, which the reader reuses.
func TestDecodeResultFrameCopies(t *testing.T) {
	data := []byte(`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":{"n":7}}}`)
	f, ok := decodeResultFrame(data)
	if !ok {
		t.Fatal("not taken")
	}
	for i := range data {
		data[i] = 'x'
	}
	if r := f.Msg.(*protocol.CapabilityResult); string(r.Result) != `{"n":7}` || r.CallID != "c1" {
		t.Fatalf("decoded %q %q after the buffer changed", r.CallID, r.Result)
	}
}

// TestDecodeResultFrameAllocs bounds the fast path's allocations.
func TestDecodeResultFrameAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	data := []byte(`{"v":2,"id":"r1","msg":{"type":"capability_result","callId":"c1","result":{"n":7}}}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeResultFrame(data) }); n > 5 {
		t.Fatalf("%.0f allocations per frame, want at most 5", n)
	}
}
