package protocol

import (
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/internal/testutil"
)

// TestAppendFrame: the hand-written frames are the bytes EncodeFrame
// writes, and what they do not cover falls back to it.
func TestAppendFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *Frame
		fast bool
	}{
		{"invoked", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1-2", Name: "ui.echo", Input: json.RawMessage(`{"n":7,"s":"a\"b"}`), InvokedBy: "agent"}}, true},
		{"invoked nil input", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1", Name: "x", InvokedBy: "agent"}}, true},
		{"invoked empty input", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage{}, InvokedBy: "agent"}}, false},
		{"invoked spaced input", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage(`{ "n" : 7 }`), InvokedBy: "agent"}}, false},
		{"invoked html input", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage(`{"h":"<b>&"}`), InvokedBy: "agent"}}, false},
		{"invoked line separator", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage("{\"h\":\"\u2028\"}"), InvokedBy: "agent"}}, false},
		{"invoked unicode input", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1", Name: "x", Input: json.RawMessage(`{"h":"é"}`), InvokedBy: "agent"}}, true},
		{"invoked escaped name", &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1", Name: "a<b", Input: json.RawMessage(`{}`), InvokedBy: "agent"}}, false},
		{"outcome value", &Frame{Seq: 9, Msg: &CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: OK(json.RawMessage(`[1,2,{"a":null}]`))}}, true},
		{"outcome null", &Frame{Seq: 9, Msg: &CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: OK(nil)}}, true},
		{"outcome error", &Frame{Seq: 9, Msg: &CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: Fail(CodeTimeout, "no result within %s", "1s")}}, true},
		{"outcome error quoted", &Frame{Seq: 9, Msg: &CapabilityOutcome{CallID: "c1", Name: "ui.echo", Outcome: Fail(CodeNotFound, "no call %q", "x")}}, false},
		{"ack", &Frame{V: 2, Seq: 3, Ref: "r1", Msg: &Ack{}}, true},
		{"ack no ref", &Frame{V: 2, Seq: 3, Msg: &Ack{}}, true},
		{"ack call id", &Frame{V: 2, Seq: 3, Ref: "r1", Msg: &Ack{CallID: "c-7"}}, true},
		{"ack escaped ref", &Frame{V: 2, Seq: 3, Ref: "r\"1", Msg: &Ack{}}, false},
		{"error reply", &Frame{V: 2, Seq: 3, Ref: "r1", Msg: &ErrorReply{Code: "conflict", Message: "no"}}, false},
		{"snapshot", &Frame{Seq: 3, Msg: &Snapshot{Seq: 3, Capabilities: []Capability{}, PendingCalls: []PendingCall{}}}, false},
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

func checkAppendFrame(t *testing.T, f *Frame) {
	t.Helper()
	want, werr := EncodeFrame(f)
	got, err := AppendFrame([]byte("prefix"), f)
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
		checkAppendFrame(t, &Frame{Seq: seq, Ref: ref, Msg: &CapabilityInvoked{CallID: callID, Name: name, Input: raw, InvokedBy: code}})
		checkAppendFrame(t, &Frame{Seq: seq, Msg: &CapabilityOutcome{CallID: callID, Name: name, Outcome: OK(raw)}})
		checkAppendFrame(t, &Frame{Seq: seq, Msg: &CapabilityOutcome{CallID: callID, Name: name, Outcome: Fail(Code(code), "%s", name)}})
		checkAppendFrame(t, &Frame{V: 2, Seq: seq, Ref: ref, Msg: &Ack{CallID: callID}})
	})
}

// TestAppendFrameAllocs: the hand-written frames allocate nothing in a
// buffer that is large enough.
func TestAppendFrameAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	f := &Frame{Seq: 7, Msg: &CapabilityInvoked{CallID: "c1-2", Name: "ui.echo", Input: json.RawMessage(`{"n":7}`), InvokedBy: "agent"}}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { _, _ = AppendFrame(buf[:0], f) }); n > 0 {
		t.Fatalf("%.0f allocations per frame, want 0", n)
	}
}
