package store

import (
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// FuzzDecodeCheckpoint: whatever the checkpoints bucket holds, decoding
// it either fails or gives a checkpoint a session restores from without
// a panic (it may refuse it: RestoreFrom checks what Check does not).
func FuzzDecodeCheckpoint(f *testing.F) {
	reg := &protocol.CapabilityRegister{Capabilities: []protocol.Capability{{Name: "a", Description: "d",
		InputSchema: json.RawMessage(`{"type":"object"}`), Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}}}}
	out := &protocol.CapabilityOutcome{CallID: "cold1-1", Name: "a", Outcome: protocol.OK(json.RawMessage(`1`))}
	cp, err := session.Compact(nil, []session.Event{{Seq: 1, Msg: reg}, {Seq: 2, Msg: out}, {Seq: 3, Msg: out}}, &session.Options{LogMemory: 1})
	if err != nil {
		f.Fatal(err)
	}
	good, err := encodeCheckpoint(&storedCheckpoint{Version: checkpointVersion, Checkpoint: *cp, Stream: 3, Bytes: 300})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"v":1,"first":1,"seq":1,"stream":1,"latest":[{"seq":1,"type":"turn_started","turn":1}]}`))
	f.Add([]byte(`{"v":1,"first":1,"seq":2,"stream":9,"finished":{"codes":[""],"calls":[32768],"next":0},"state":[],"latest":[{"seq":2,"type":"capability_deregister","names":["a"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeCheckpoint(data)
		if err != nil {
			return
		}
		if st.Checkpoint.Check() != nil {
			t.Fatal("decoded a checkpoint that Check refuses")
		}
		if _, err := session.RestoreFrom("s", &st.Checkpoint, nil, &session.Options{PeerGrace: -1}, nil); err != nil {
			t.Fatalf("a checkpoint that passed Check is refused: %v", err)
		}
	})
}
