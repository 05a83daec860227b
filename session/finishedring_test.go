package session

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// TestFinishedRingIsOneWordACall: a session's ring of its latest 1,024
// finished calls takes 8 KiB, whatever it remembers of each — counters up
// to maxFinishedCounter, any of its 64 prefixes, any of its 256 codes —
// and a call whose counter is past the bound is not remembered, rather
// than remembered as another call.
func TestFinishedRingIsOneWordACall(t *testing.T) {
	s := &Session{idPrefix: "cq3k5x7m2-", finished: finishedRing{size: 1024}}
	failed := protocol.Outcome{Err: &protocol.Error{Code: "tool_gone", Message: "x"}}
	for i := range 2000 {
		n := uint64(i + 1)
		if i == 1999 {
			n = maxFinishedCounter
		}
		s.rememberFinishedLocked("cq3k5x7m2-"+formatCounter(n), failed, nil)
	}
	if got := cap(s.finished.calls) * 8; got != 8<<10 {
		t.Errorf("1,024 finished calls take %d bytes, want 8192", got)
	}
	if how, ok := s.finishedHow("cq3k5x7m2-" + formatCounter(maxFinishedCounter)); !ok || how != "with tool_gone" {
		t.Errorf("the call with the largest counter: %q, %v; want remembered with tool_gone", how, ok)
	}
	if how, ok := s.finishedHow("cq3k5x7m2-" + formatCounter(1_000_000)); ok {
		t.Errorf("a call never made is remembered %s", how)
	}
	past := "cq3k5x7m2-" + formatCounter(maxFinishedCounter+1)
	s.rememberFinishedLocked(past, failed, nil)
	if how, ok := s.finishedHow(past); ok {
		t.Errorf("a call whose counter is past the bound is remembered %s", how)
	}
	if how, ok := s.finishedHow("cq3k5x7m2-1"); ok {
		t.Errorf("a call past the ring's 1,024 is remembered %s", how)
	}
	for p := range maxFinishedPrefixes {
		fc := newFinishedCall(maxFinishedCounter, uint16(p), codeOverflow)
		if fc.counter() != maxFinishedCounter || fc.prefix() != p || fc.code() != codeOverflow {
			t.Fatalf("(%d, %d, %d) reads back as (%d, %d, %d)", uint64(maxFinishedCounter), p, codeOverflow, fc.counter(), fc.prefix(), fc.code())
		}
	}
}

func formatCounter(n uint64) string { return strconv.FormatUint(n, 36) }

// TestFinishedRingOutlivesItsTables: a session restored more times than
// its tables hold prefixes (each process makes its calls under a prefix
// of its own) still remembers how the latest processes' calls ended —
// it told a late result for the previous process's call not_found from
// the 65th process on — and so with more error codes and fire-and-forget
// owners than the tables hold; what has left the ring is forgotten.
func TestFinishedRingOutlivesItsTables(t *testing.T) {
	s := New("s", &Options{FinishedMemory: 16})
	s.mu.Lock()
	defer s.mu.Unlock()
	id := func(process, call int) string { return fmt.Sprintf("cp%04d-%x", process, call+1) }
	for process := range 200 {
		for call := range 4 {
			var out protocol.Outcome
			var ff *Peer
			switch call {
			case 0:
				out = protocol.OK(json.RawMessage(`1`))
			case 1:
				out = protocol.Fail(protocol.Code(fmt.Sprintf("code_%d", process)), "no")
			case 2:
				out, ff = protocol.OK(json.RawMessage(`{}`)), &Peer{Side: SideApp, AppID: fmt.Sprintf("app-%d", process)}
			default:
				out = protocol.Fail(protocol.CodeTimeout, "late")
			}
			s.rememberFinishedLocked(id(process, call), out, ff)
		}
		for call, want := range []string{"with a result", fmt.Sprintf("with code_%d", process), "with {} at once (fire-and-forget)", "with timeout"} {
			if how, ok := s.finishedHow(id(process, call)); !ok || how != want {
				t.Fatalf("process %d, call %d: %q %v, want %q", process, call, how, ok, want)
			}
		}
		if process >= 1 {
			if how, ok := s.finishedHow(id(process-1, 1)); !ok || how != fmt.Sprintf("with code_%d", process-1) {
				t.Fatalf("process %d: the previous process's call: %q %v", process, how, ok)
			}
		}
		if process >= 5 {
			if _, ok := s.finishedHow(id(process-5, 0)); ok {
				t.Fatalf("process %d: a call that left the ring is remembered", process)
			}
		}
	}
	if f := &s.finished; len(f.prefixes) > maxFinishedPrefixes || len(f.codes) > maxFinishedCodes || len(f.owners) > maxFinishedOwners {
		t.Fatalf("tables grew past their bounds: %d prefixes, %d codes, %d owners", len(f.prefixes), len(f.codes), len(f.owners))
	}
}
