package protocol

import (
	"encoding/json"
	"testing"
)

// TestDecodeCallFastTakesTheJournals: the kernel's own encoding of a
// call's two events takes the one-pass path, and what it decodes does
// not alias the bytes it read (a load reuses its buffers).
func TestDecodeCallFastTakesTheJournals(t *testing.T) {
	for _, m := range []Message{
		&CapabilityInvoked{CallID: "cq3k5x7m2-42", Name: "fs.read", Input: json.RawMessage(`{"path":"notes/todo.md","maxBytes":65536}`), InvokedBy: InvokedByAgent},
		&CapabilityOutcome{CallID: "cq3k5x7m2-42", Name: "fs.read", Outcome: OK(json.RawMessage(`{"text":"- buy milk\n- write the wake benchmark"}`))},
	} {
		b, err := AppendFrame(nil, &Frame{Seq: 1017, Msg: m})
		if err != nil {
			t.Fatal(err)
		}
		msg := b[len(`{"v":2,"seq":1017,"msg":`) : len(b)-1]
		got, ok := decodeCallFast(msg)
		if !ok {
			t.Fatalf("%s: not taken by the one-pass path", msg)
		}
		want, err := EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		for i := range msg {
			msg[i] = ' '
		}
		if again, err := EncodeMessage(got); err != nil || string(again) != string(want) {
			t.Fatalf("decoded %s after its bytes changed, want %s (%v)", again, want, err)
		}
	}
}
