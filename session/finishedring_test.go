package session

import (
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
