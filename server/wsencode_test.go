package server

import (
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// TestAppendFrame: the hand-written frames are the bytes EncodeFrame
// writes, and what they do not cover falls back to it.
func TestAppendFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *protocol.Frame
		fast bool
	}{
		{"invoked", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1-2", Name: "ui.echo", Input: json.RawMessage(`{"n":7,"s":"a\"b"}`), InvokedBy: "agent"}}, true},
		{"invoked nil input", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1", Name: "x", InvokedBy: "agent"}}, true},
		{"invoked empty input", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage{}, InvokedBy: "agent"}}, false},
		{"invoked spaced input", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage(`{ "n" : 7 }`), InvokedBy: "agent"}}, false},
		{"invoked html input", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage(`{"h":"<b>&"}`), InvokedBy: "agent"}}, false},
		{"invoked line separator", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage("{\"h\":\"\u2028\"}"), InvokedBy: "agent"}}, false},
		{"invoked unicode input", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage(`{"h":"é"}`), InvokedBy: "agent"}}, true},
		{"invoked escaped name", &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1", Name: "a<b", Input: json.RawMessage(`{}`), InvokedBy: "agent"}}, false},
		{"outcome value", &protocol.Frame{Seq: 9, Msg: &protocol.CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: protocol.OK(json.RawMessage(`[1,2,{"a":null}]`))}}, true},
		{"outcome null", &protocol.Frame{Seq: 9, Msg: &protocol.CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: protocol.OK(nil)}}, true},
		{"outcome error", &protocol.Frame{Seq: 9, Msg: &protocol.CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: protocol.Fail(protocol.CodeTimeout, "no result within %s", "1s")}}, true},
		{"outcome error quoted", &protocol.Frame{Seq: 9, Msg: &protocol.CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: protocol.Fail(protocol.CodeNotFound, "no call %q", "x")}}, false},
		{"ack", &protocol.Frame{V: 2, Seq: 3, Ref: "r1", Msg: &protocol.Ack{}}, true},
		{"ack no ref", &protocol.Frame{V: 2, Seq: 3, Msg: &protocol.Ack{}}, true},
		{"ack call id", &protocol.Frame{V: 2, Seq: 3, Ref: "r1", Msg: &protocol.Ack{CallID: "c-7"}}, true},
		{"ack escaped ref", &protocol.Frame{V: 2, Seq: 3, Ref: "r\"1", Msg: &protocol.Ack{}}, false},
		{"error reply", &protocol.Frame{V: 2, Seq: 3, Ref: "r1", Msg: &protocol.ErrorReply{Code: "conflict", Message: "no"}}, false},
		{"snapshot", &protocol.Frame{Seq: 3, Msg: &protocol.Snapshot{Seq: 3, Capabilities: []protocol.Capability{}, PendingCalls: []protocol.PendingCall{}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, fast := appendFrameFast([]byte("prefix"), tc.f)
			if fast != tc.fast {
				t.Errorf("hand-written: %v, want %v", fast, tc.fast)
			}
			checkAppendFrame(t, tc.f)
		})
	}
}

func checkAppendFrame(t *testing.T, f *protocol.Frame) {
	t.Helper()
	want, werr := protocol.EncodeFrame(f)
	got, err := appendFrame([]byte("prefix"), f)
	if (err == nil) != (werr == nil) {
		t.Fatalf("appendFrame error %v, EncodeFrame error %v", err, werr)
	}
	if err != nil {
		return
	}
	if string(got) != "prefix"+string(want) {
		t.Fatalf("appendFrame wrote\n%s\nEncodeFrame\n%s", got[len("prefix"):], want)
	}
}

// FuzzAppendFrame holds the hand-written frames to EncodeFrame.
func FuzzAppendFrame(f *testing.F) {
	f.Add("c1", "ui.echo", []byte(`{"n":7}`), "", "r1", uint64(3))
	f.Add("c<1", "ui", []byte(`{ "n" : "\u2028" }`), "timeout", "", uint64(0))
	f.Add("c1", "ui", []byte(`"\\"`), "x y", "r\"", uint64(1))
	f.Add("0", "0", []byte{}, "0", "", uint64(129)) // an empty, non-nil input: EncodeFrame's error
	f.Fuzz(func(t *testing.T, callID, name string, raw []byte, code, ref string, seq uint64) {
		checkAppendFrame(t, &protocol.Frame{Seq: seq, Ref: ref, Msg: &protocol.CapabilityInvoked{CallID: callID, Name: name, Input: raw, InvokedBy: code}})
		checkAppendFrame(t, &protocol.Frame{Seq: seq, Msg: &protocol.CapabilityOutcome{CallID: callID, Name: name, Outcome: protocol.OK(raw)}})
		checkAppendFrame(t, &protocol.Frame{Seq: seq, Msg: &protocol.CapabilityOutcome{CallID: callID, Name: name, Outcome: protocol.Fail(protocol.Code(code), "%s", name)}})
		checkAppendFrame(t, &protocol.Frame{V: 2, Seq: seq, Ref: ref, Msg: &protocol.Ack{CallID: callID}})
	})
}

// TestAppendFrameAllocs: the hand-written frames allocate nothing in a
// buffer that is large enough.
func TestAppendFrameAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	f := &protocol.Frame{Seq: 7, Msg: &protocol.CapabilityInvoked{CallID: "c1-2", Name: "ui.echo", Input: json.RawMessage(`{"n":7}`), InvokedBy: "agent"}}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { _, _ = appendFrame(buf[:0], f) }); n > 0 {
		t.Fatalf("%.0f allocations per frame, want 0", n)
	}
}
