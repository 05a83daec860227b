package session_test

import (
	"encoding/json"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// progressGap is session's progressEvery.
const progressGap = 50 * time.Millisecond

// TestPeerProgress: the peer a call was dispatched to reports progress
// with capability_progress; the invoker that asked for it (WithProgress)
// receives it, nobody else may report, and a bad report changes nothing.
//
// It runs in a synctest bubble: time stands still while the test does not
// wait, so the coalescing (50 ms between reports) is exact.
func TestPeerProgress(t *testing.T) { synctest.Test(t, testPeerProgress) }

func testPeerProgress(t *testing.T) {
	s := session.New("progress", nil)
	if err := s.Register(session.Client, clientCap("peer.slow")); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(session.App("calendar"), appCap("calendar", "cal.other")); err != nil {
		t.Fatal(err)
	}
	got := make(chan session.Progress, 8)
	ctx := session.WithProgress(waitCtx(t), func(p session.Progress) { got <- p })
	sub := watch(t, s)
	done := make(chan protocol.Outcome, 1)
	go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "peer.slow", textInput) }()
	inv, _ := waitFor[*protocol.CapabilityInvoked](t, sub, nil)

	progress := func(p session.Peer, m protocol.CapabilityProgress) error {
		m.CallID = inv.CallID
		return s.Progress(p, &m)
	}
	if err := progress(session.Client, protocol.CapabilityProgress{Progress: 1, Total: 4, Message: "page 1"}); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, got, "the first report"); p != (session.Progress{Done: 1, Total: 4, Message: "page 1"}) {
		t.Fatalf("the invoker got %+v", p)
	}
	// Refused, each naming what was wrong, and passed on to nobody.
	wantErrCode(t, progress(session.App("calendar"), protocol.CapabilityProgress{Progress: 2}), protocol.CodeForbidden)
	wantErrCode(t, progress(session.Client, protocol.CapabilityProgress{Progress: -1}), protocol.CodeInvalidRequest)
	wantErrCode(t, progress(session.Client, protocol.CapabilityProgress{Progress: math.Inf(1)}), protocol.CodeInvalidRequest)
	wantErrCode(t, progress(session.Client, protocol.CapabilityProgress{Progress: 1, Message: string(make([]byte, 2<<10))}), protocol.CodeInvalidRequest)
	wantErrCode(t, s.Progress(session.Client, &protocol.CapabilityProgress{CallID: "c-nope", Progress: 1}), protocol.CodeNotFound)
	// Reports faster than the invoker needs are coalesced; the final one
	// always passes.
	for i := 0; i < 100; i++ {
		if err := progress(session.Client, protocol.CapabilityProgress{Progress: 2, Total: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := progress(session.Client, protocol.CapabilityProgress{Progress: 4, Total: 4, Message: "done"}); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, got, "the final report"); p != (session.Progress{Done: 4, Total: 4, Message: "done"}) {
		t.Fatalf("after 100 reports within 50 ms, the invoker got %+v, want only the final one", p)
	}
	time.Sleep(progressGap) // the fake clock: 50 ms later a report passes again
	if err := progress(session.Client, protocol.CapabilityProgress{Progress: 3, Total: 4}); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, got, "a report 50 ms later"); p.Done != 3 {
		t.Fatalf("the invoker got %+v", p)
	}
	if err := s.Result(session.Client, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	wantValue(t, recv(t, done, "the outcome"), `"ok"`)
	// The call is over: a late report is an error, and changes nothing.
	wantErrCode(t, progress(session.Client, protocol.CapabilityProgress{Progress: 4}), protocol.CodeConflict)

	// Through a frame, as a WebSocket peer sends it.
	f, err := protocol.DecodeFrame([]byte(`{"v":2,"id":"k1","msg":{"type":"capability_progress","callId":"` + inv.CallID + `","progress":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if reply := s.HandleFrame(session.Client, f); reply.Msg.MessageType() != protocol.TypeError {
		t.Fatalf("a report for a finished call got %s", jsonOf(t, reply))
	}
}
