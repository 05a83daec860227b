package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/brainrt/brain/internal/textcut"
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

	// 3,072 calls, a second apart: the latest 1,024 are kept, the oldest
	// chunk goes once the others hold 1,024.
	var ct callTimes
	const made = 3 * maxCallTimes
	for i := range made {
		observeCall(&ct, fmt.Sprint("c", i), at.Add(time.Duration(i)*time.Second), i%7 == 0, outcomes["value"])
	}
	for i := made - maxCallTimes; i < made; i++ {
		got, ok := ct.get(fmt.Sprint("c", i))
		if !ok {
			t.Fatalf("call %d of %d, one of the latest %d, is not kept", i+1, made, maxCallTimes)
		}
		if start := at.Add(time.Duration(i) * time.Second); !got.Points[0].Time.Equal(start) {
			t.Fatalf("call %d started at %s, want %s", i+1, got.Points[0].Time, start)
		}
	}
	if _, ok := ct.get("c0"); ok {
		t.Errorf("the first of %d calls is kept", made)
	}
	if len(ct.live) != 0 || ct.total < maxCallTimes || ct.total-ct.chunks[0].calls >= maxCallTimes {
		t.Errorf("%d calls live, %d kept in %d chunks (%d in the oldest): want none live, at least %d kept, and fewer without the oldest chunk",
			len(ct.live), ct.total, len(ct.chunks), ct.chunks[0].calls, maxCallTimes)
	}
}

// TestCallTimesMemory: a session's timings of its latest 1,024 calls
// take about 35 bytes a call: records without pointers, about 70 bytes
// a call here, in chunks each compressed once full to about 30 bytes a
// call, and the chunk being filled. A record of its own, its points and
// outcome, and a map entry took about 250; the records uncompressed, 70.
// The calls here are as a busy session makes them — kernel call ids, a
// few capability names, small results, points microseconds apart and
// calls up to half a second apart, each at a random moment (seeded: the
// same every run) — and what the timings hold is counted exactly (a heap
// sample is not: it moves by more than the timings with what else the
// collector frees).
func TestCallTimesMemory(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 1024))
	at := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	ct := &callTimes{}
	names := []string{"ui.echo", "ui.confirm", "search_docs", "fs.read"}
	for i := range 2 * maxCallTimes {
		ev := session.CallEvent{CallID: "cq3k5x7m2a-" + strconv.FormatUint(uint64(i+1), 36), Name: names[r.IntN(len(names))],
			Invoker: protocol.AudienceLLM, Time: at, Kind: session.CallStarted}
		for _, kind := range []session.CallEventKind{session.CallStarted, session.CallDispatched, session.CallFinished} {
			ev.Kind, ev.Time = kind, ev.Time.Add(time.Duration(5_000+r.IntN(60_000)))
			if kind == session.CallFinished {
				ev.Outcome = protocol.Outcome{Value: json.RawMessage(fmt.Sprintf(`{"n":%d,"ok":true}`, r.IntN(1000)))}
			}
			ct.observe(ev)
		}
		at = at.Add(time.Duration(r.Int64N(int64(500 * time.Millisecond))))
	}
	for i, c := range ct.chunks[:len(ct.chunks)-1] {
		if !c.packed {
			t.Fatalf("chunk %d of %d, full, is not compressed", i+1, len(ct.chunks))
		}
	}
	held := heldByTimings(ct)
	per := held / ct.total
	t.Logf("%d calls kept in %d chunks: %d bytes, %d a call", ct.total, len(ct.chunks), held, per)
	if per > 40 {
		t.Errorf("a call's timings take %d bytes, want at most 40", per)
	}
	for i := 2*maxCallTimes - ct.total; i < 2*maxCallTimes; i++ {
		if _, ok := ct.get("cq3k5x7m2a-" + strconv.FormatUint(uint64(i+1), 36)); !ok {
			t.Fatalf("call %d, one of the latest %d, is not kept", i+1, ct.total)
		}
	}
}

// heldByTimings is what ct's finished calls hold: its chunks' bytes and
// their slice.
func heldByTimings(ct *callTimes) int {
	held := int(unsafe.Sizeof(callChunk{})) * cap(ct.chunks)
	for _, c := range ct.chunks {
		held += cap(c.b)
	}
	return held
}

// TestCallTimesOfAFewCalls: a session that made a few calls holds a few
// hundred bytes of timings, not a whole chunk.
func TestCallTimesOfAFewCalls(t *testing.T) {
	ct := &callTimes{}
	for i := range 3 {
		observeCall(ct, fmt.Sprintf("cq3k5x7m2a-%d", i+1), time.Now(), false, &protocol.Outcome{Value: json.RawMessage(`{"n":7}`)})
	}
	if len(ct.chunks) != 1 || cap(ct.chunks[0].b) > firstCallChunkBytes {
		t.Errorf("3 calls: %d chunks, the first of %d bytes; want one of at most %d", len(ct.chunks), cap(ct.chunks[0].b), firstCallChunkBytes)
	}
	for i := range 3 {
		if _, ok := ct.get(fmt.Sprintf("cq3k5x7m2a-%d", i+1)); !ok {
			t.Errorf("call %d is not kept", i+1)
		}
	}
}

// TestCallTimesBoundWhatPeersChose: a call's record keeps at most
// maxKeptText of each text a peer chose — a value longer than that is
// left out with its size, a longer error message or decidedBy is cut —
// so that a session's latest 1,024 calls of 64 KiB results hold what
// 1,024 small ones do, not 64 MiB.
func TestCallTimesBoundWhatPeersChose(t *testing.T) {
	at := time.Now()
	big := json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)
	edge := json.RawMessage(`"` + strings.Repeat("y", maxKeptText-2) + `"`)
	var ct callTimes
	observeCall(&ct, "big", at, false, &protocol.Outcome{Value: big})
	observeCall(&ct, "edge", at, false, &protocol.Outcome{Value: edge})
	observeCall(&ct, "err", at, false, &protocol.Outcome{Err: &protocol.Error{Code: protocol.CodeInternal, Message: strings.Repeat("é", 50<<10)}})
	ev := session.CallEvent{CallID: "dec", Name: "ui.echo", Invoker: protocol.AudienceLLM, Time: at, Kind: session.CallStarted}
	for _, k := range []session.CallEventKind{session.CallStarted, session.ApprovalRequested, session.ApprovalDecided, session.CallDispatched, session.CallFinished} {
		ev.Kind, ev.Decision, ev.DecidedBy, ev.Outcome = k, protocol.DecisionApproved, "ops ("+strings.Repeat("A", 8<<10)+")", protocol.Outcome{Value: json.RawMessage(`1`)}
		ct.observe(ev)
	}

	if got, _ := ct.get("big"); got.Outcome != nil || got.OutcomeBytes != len(big) {
		t.Errorf("a 64 KiB value: outcome %v, outcomeBytes %d; want it left out, with its size %d", got.Outcome, got.OutcomeBytes, len(big))
	}
	if got, _ := ct.get("edge"); got.Outcome == nil || string(got.Outcome.Value) != string(edge) || got.OutcomeBytes != 0 {
		t.Errorf("a value of exactly %d bytes: %+v; want it kept", maxKeptText, got)
	}
	got, _ := ct.get("err")
	if got.Outcome == nil || got.Outcome.Err == nil || got.Outcome.Err.Code != protocol.CodeInternal ||
		len(got.Outcome.Err.Message) > maxKeptText+len(textcut.Ellipsis) || !strings.HasSuffix(got.Outcome.Err.Message, textcut.Ellipsis) {
		t.Errorf("a 100 KiB error message: %+v; want its code and a message cut to %d bytes", got.Outcome, maxKeptText)
	}
	if got, _ := ct.get("dec"); len(got.DecidedBy) > maxKeptText+len(textcut.Ellipsis) || !strings.HasPrefix(got.DecidedBy, "ops (AAA") {
		t.Errorf("an 8 KiB decidedBy is kept as %d bytes (%.12q…); want it cut to %d", len(got.DecidedBy), got.DecidedBy, maxKeptText)
	}

	ct = callTimes{}
	for i := range maxCallTimes {
		observeCall(&ct, fmt.Sprintf("cq3k5x7m2a-%d", i+1), at.Add(time.Duration(i)*time.Second), false, &protocol.Outcome{Value: big})
	}
	if held := heldByTimings(&ct); held/ct.total > 72 {
		t.Errorf("%d calls of 64 KiB results hold %d bytes of timings, %d a call; want at most 72 a call", ct.total, held, held/ct.total)
	}
}

// BenchmarkCallTimesObserve: what a finished call's timings cost the call
// that made them — its three points observed, its record encoded, and
// once a chunk is full (about 60 calls) the chunk compressed.
func BenchmarkCallTimesObserve(b *testing.B) {
	at := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	out := &protocol.Outcome{Value: json.RawMessage(`{"n":7,"ok":true}`)}
	ids := make([]string, 4*maxCallTimes)
	for i := range ids {
		ids[i] = "cq3k5x7m2a-" + strconv.FormatUint(uint64(i+1), 36)
	}
	var ct callTimes
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		observeCall(&ct, ids[i%len(ids)], at.Add(time.Duration(i)*time.Millisecond), false, out)
		i++
	}
}

// BenchmarkCallTimesGetOldest: the console's read of the oldest call a
// session remembers — every chunk decompressed and looked through.
func BenchmarkCallTimesGetOldest(b *testing.B) {
	at := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	out := &protocol.Outcome{Value: json.RawMessage(`{"n":7,"ok":true}`)}
	var ct callTimes
	for i := range 2 * maxCallTimes {
		observeCall(&ct, "cq3k5x7m2a-"+strconv.FormatUint(uint64(i+1), 36), at.Add(time.Duration(i)*time.Millisecond), false, out)
	}
	oldest := "cq3k5x7m2a-" + strconv.FormatUint(uint64(2*maxCallTimes-ct.total+1), 36)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ct.get(oldest); !ok {
			b.Fatal("the oldest call is not kept")
		}
	}
}
