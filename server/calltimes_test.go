package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// observeCall reports a call's life to ct: started, an approval when
// decided is set, dispatched, and finished with out (none when nil).
func observeCall(ct *callTimes, id string, at time.Time, decided bool, out *protocol.Outcome) {
	ev := session.CallEvent{CallID: id, Name: "ui.échο", Invoker: protocol.AudienceLLM, Time: at, Kind: session.CallStarted}
	ct.observe(ev)
	if decided {
		ev.Kind, ev.Time = session.ApprovalRequested, at.Add(3*time.Millisecond)
		ct.observe(ev)
		ev.Kind, ev.Time, ev.Decision, ev.DecidedBy = session.ApprovalDecided, at.Add(2*time.Second), protocol.DecisionApproved, "ops (Ada)"
		ct.observe(ev)
	}
	ev.Kind, ev.Time = session.CallDispatched, ev.Time.Add(time.Microsecond)
	ct.observe(ev)
	if out != nil {
		ev.Kind, ev.Time, ev.Outcome = session.CallFinished, ev.Time.Add(40*time.Millisecond), *out
		ct.observe(ev)
	}
}

// TestCallTimesKeepFinishedCallsEncoded: a finished call's timings read
// back exactly as they were observed — points to the nanosecond, the
// decision, the outcome's value or error — whether the call is still
// being made or finished and encoded; the latest maxCallTimes are kept.
func TestCallTimesKeepFinishedCallsEncoded(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 20, 0, 123456789, time.UTC)
	outcomes := map[string]*protocol.Outcome{
		"value":   {Value: json.RawMessage(`{"shown":true,"text":"ü\u2028"}`)},
		"null":    {Value: json.RawMessage(`null`)},
		"error":   {Err: &protocol.Error{Code: protocol.CodeTimeout, Message: "no answer in 60 s"}},
		"running": nil,
	}
	for name, out := range outcomes {
		for _, decided := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s,decided=%v", name, decided), func(t *testing.T) {
				var ct, want callTimes
				observeCall(&ct, "c1", at, decided, out)
				want.live = map[string]*callRecord{} // the record as it was observed, never encoded
				observeCall(&want, "c1", at, decided, nil)
				w, _ := want.get("c1")
				if out != nil {
					w.Points = append(w.Points, CallPoint{Kind: "call_finished", Time: w.Points[len(w.Points)-1].Time.Add(40 * time.Millisecond)})
					w.Outcome = out
				}
				got, ok := ct.get("c1")
				if !ok || !reflect.DeepEqual(got, w) {
					t.Fatalf("got %+v (%v),\nwant %+v", got, ok, w)
				}
				if _, ok := ct.get("c2"); ok {
					t.Fatal("a call never made has timings")
				}
			})
		}
	}

	var ct callTimes
	for i := range maxCallTimes + 10 {
		observeCall(&ct, fmt.Sprint("c", i), at, false, outcomes["value"])
	}
	for _, c := range []struct {
		i    int
		kept bool
	}{{0, false}, {9, false}, {10, true}, {maxCallTimes + 9, true}} {
		if _, ok := ct.get(fmt.Sprint("c", c.i)); ok != c.kept {
			t.Errorf("call %d of %d: kept %v, want %v", c.i, maxCallTimes+10, ok, c.kept)
		}
	}
	if len(ct.live) != 0 || len(ct.done) != maxCallTimes {
		t.Errorf("%d calls live and %d finished kept, want 0 and %d", len(ct.live), len(ct.done), maxCallTimes)
	}
}

// TestCallTimesMemory: a session's timings of its latest 1,024 calls take
// about 80 bytes a call, where a record of its own with a map entry took
// about 250.
func TestCallTimesMemory(t *testing.T) {
	at := time.Now()
	out := &protocol.Outcome{Value: json.RawMessage(`{"n":7}`)}
	ids := make([]string, maxCallTimes)
	for i := range ids {
		ids[i] = fmt.Sprintf("cq3k5x7m2a-%d", i+1) // as sessions make them, made beforehand
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ct := &callTimes{}
	for _, id := range ids {
		observeCall(ct, id, at, false, out)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ct)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / maxCallTimes
	t.Logf("%d bytes of heap a call", per)
	if per > 112 {
		t.Errorf("a call's timings take %d bytes of heap, want at most 112", per)
	}
}
