package server_test

import (
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// TestErrorRepliesCarryRef: over the WebSocket, an error reply to a frame
// whose id could be read refers to it — also for an unknown or missing v
// and a missing msg — and a peer's frame carrying the kernel's seq or ref
// is refused with an error naming the field. The connection stays usable.
func TestErrorRepliesCarryRef(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(clientToken, "refs", "?after=0")
	tests := []struct {
		name, frame, ref, want string
	}{
		{"unknown v", `{"v":9,"id":"e1","msg":{"type":"capability_deregister","names":[]}}`, "e1", "unsupported protocol version 9"},
		{"no v", `{"id":"e2","msg":{"type":"capability_deregister","names":[]}}`, "e2", `missing required field "v"`},
		{"no msg", `{"v":2,"id":"e3"}`, "e3", `missing required field "msg"`},
		{"seq from a peer", `{"v":2,"id":"e4","seq":3,"msg":{"type":"capability_deregister","names":[]}}`, "e4", "seq: set by the kernel only"},
		{"ref from a peer", `{"v":2,"id":"e5","ref":"x","msg":{"type":"capability_deregister","names":[]}}`, "e5", "ref: set by the kernel only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.sendRaw(tt.frame)
			r := c.until(ofType(protocol.TypeError))
			e := r.Msg.(*protocol.ErrorReply)
			if r.Ref != tt.ref || e.Code != protocol.CodeInvalidRequest || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("reply ref %q %+v, want ref %q invalid_request naming %q", r.Ref, e, tt.ref, tt.want)
			}
			c.send("ok", &protocol.CapabilityDeregister{Names: []string{}})
			if r := c.reply("ok"); r.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("the connection is not usable after a refused frame: %+v", r.Msg)
			}
		})
	}
}
