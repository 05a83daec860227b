package session_test

import (
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// FuzzApproveFrame: whatever sequence of capability_approve frames a peer
// sends (the fuzzer fills in the decision, digest and deciding side), the
// session never panics, the call runs at most once, and it runs only if an
// accepted approval echoed the request's digest or carried none (the
// request is never re-issued here). "DIGEST" in a frame is
// replaced by the real digest, so that the fuzzer reaches accepted paths.
func FuzzApproveFrame(f *testing.F) {
	f.Add(`{"type":"capability_approve","callId":"CALL","decision":"approved","decidedBy":"ada","inputDigest":"DIGEST"}`, uint8(0), uint8(2))
	f.Add(`{"type":"capability_approve","callId":"CALL","decision":"approved","decidedBy":"ada"}`, uint8(1), uint8(1))
	f.Add(`{"type":"capability_approve","callId":"CALL","decision":"rejected","decidedBy":"","feedback":"no"}`, uint8(2), uint8(3))
	f.Add(`{"type":"capability_approve","callId":"CALL","decision":"approved","decidedBy":"x","inputDigest":"sha256:00"}`, uint8(3), uint8(2))
	peers := []session.Peer{session.Client, session.Operator("ops"), session.Runtime, session.App("a"), session.Environment, {Side: "mcp"}}
	f.Fuzz(func(t *testing.T, msg string, who, repeat uint8) {
		s := session.New("fuzz", nil)
		ran, _ := countingCap(t, s, "fs.delete")
		sub := s.Subscribe(0)
		defer sub.Close()
		id, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
		if perr != nil {
			t.Fatal(perr)
		}
		req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
		msg = strings.ReplaceAll(strings.ReplaceAll(msg, "CALL", id), "DIGEST", req.InputDigest)
		f, err := protocol.DecodeFrame([]byte(`{"v":2,"id":"f","msg":` + msg + `}`))
		if err != nil {
			return
		}
		approvedOK := false
		for i := range int(repeat%4) + 1 {
			p := peers[(int(who)+i)%len(peers)]
			reply := s.HandleFrame(p, f)
			if a, ok := f.Msg.(*protocol.CapabilityApprove); ok && reply.Msg.MessageType() == protocol.TypeAck && a.Decision == protocol.DecisionApproved {
				if (a.InputDigest != req.InputDigest && a.InputDigest != "") || a.CallID != id {
					t.Fatalf("an approval with digest %q for %q was accepted (want %q for %q)", a.InputDigest, a.CallID, req.InputDigest, id)
				}
				if p.Side != session.SideClient && p.Side != session.SideOperator {
					t.Fatalf("%s approved", p)
				}
				approvedOK = true
			}
		}
		if approvedOK {
			waitFor(t, sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == id })
		} else {
			_ = s.Cancel(id, "fuzz")
		}
		if n := ran.Load(); n > 1 || (n == 1) != approvedOK {
			t.Fatalf("ran %d times, approved %v", n, approvedOK)
		}
	})
}
