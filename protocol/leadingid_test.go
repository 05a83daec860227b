package protocol

import (
	"bytes"
	"testing"
)

// FuzzLeadingFrameID: whatever the bytes, LeadingFrameID does not panic;
// an id it finds in a prefix stays what it finds however much more is
// read; and of a whole frame whose one "id" comes before its other
// members, it finds what the decoder reads.
func FuzzLeadingFrameID(f *testing.F) {
	for _, s := range []string{
		`{"v":2,"id":"q5","msg":{"type":"resume","afterSeq":0}}`,
		`{"id":"a\u0062","v":2}`,
		`{"v":2,"msg":{"type":"resume"},"id":"late"}`,
		`{"id":7}`, `{"id":"x","id":"y"}`, `[{"id":"x"}]`, `{"i`, ``,
	} {
		f.Add([]byte(s), 10)
	}
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if cut < 0 || cut > len(data) {
			cut = len(data)
		}
		id := LeadingFrameID(data[:cut])
		if id != "" && LeadingFrameID(data) != id {
			t.Fatalf("%q finds %q in its first %d bytes and %q in all of them", data, id, cut, LeadingFrameID(data))
		}
		if whole := frameID(data); whole != "" && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte(`{"id"`)) && LeadingFrameID(data) != whole {
			t.Fatalf("%q: a frame with its id first: %q, the decoder reads %q", data, LeadingFrameID(data), whole)
		}
	})
}
