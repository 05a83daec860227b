package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// finishedCalls makes n calls to an agent capability that fails every
// third, and returns their outcome events (the session's latest n).
func finishedCalls(t *testing.T, s *session.Session, n int) []*protocol.CapabilityOutcome {
	t.Helper()
	i := 0
	h := session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		i++
		if i%3 == 0 {
			return nil, protocol.Errorf("quota_exceeded", "the third")
		}
		return c.Input, nil
	})
	if err := s.RegisterAgent(agentCap("echo"), h); err != nil {
		t.Fatal(err)
	}
	for range n {
		s.Invoke(context.Background(), protocol.AudienceLLM, "echo", json.RawMessage(`{"text":"x"}`))
	}
	outs := only[*protocol.CapabilityOutcome](allEvents(t, s))
	if len(outs) < n {
		t.Fatalf("%d outcomes, want at least %d", len(outs), n)
	}
	return outs[len(outs)-n:]
}

// lateError is what a late cancellation of id is told.
func lateError(s *session.Session, id string) *protocol.Error {
	var pe *protocol.Error
	if err := s.Cancel(id, ""); !errors.As(err, &pe) {
		return &protocol.Error{Code: "none", Message: "not a protocol error"}
	}
	return pe
}

// TestFinishedCallsAreRemembered: the latest FinishedMemory finished
// calls are told apart from unknown ones — conflict, naming how each
// ended — whether this session made their ids or restored them from a
// journal written under another prefix; older ones, and ids only
// resembling this session's, are unknown.
func TestFinishedCallsAreRemembered(t *testing.T) {
	j := &memJournal{}
	s := session.New("f1", &session.Options{Journal: j, FinishedMemory: 4})
	outs := finishedCalls(t, s, 6)
	for i, o := range outs {
		err := lateError(s, o.CallID)
		switch {
		case i < 2:
			if err.Code != protocol.CodeNotFound {
				t.Errorf("call %d of 6, beyond the ring of 4: %s %q, want not_found", i+1, err.Code, err.Message)
			}
		case o.Outcome.IsOK():
			if err.Code != protocol.CodeConflict || !strings.Contains(err.Message, "already finished with a result") {
				t.Errorf("call %d of 6: %s %q, want conflict, finished with a result", i+1, err.Code, err.Message)
			}
		default:
			if err.Code != protocol.CodeConflict || !strings.Contains(err.Message, "already finished with quota_exceeded") {
				t.Errorf("call %d of 6: %s %q, want conflict, finished with quota_exceeded", i+1, err.Code, err.Message)
			}
		}
	}
	last := outs[5].CallID
	prefix := last[:strings.LastIndexByte(last, '-')+1]
	for _, id := range []string{prefix + "06", prefix + strings.ToUpper(last[len(prefix):]) + "x", prefix, prefix + "zzzzzzzzzzzzzz", "other-6"} {
		if err := lateError(s, id); err.Code != protocol.CodeNotFound {
			t.Errorf("%q: %s %q, want not_found", id, err.Code, err.Message)
		}
	}

	// Restored under another prefix: the journal's calls are another's ids.
	r, err := session.Restore("f1", j.events(t), &session.Options{FinishedMemory: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lateError(r, outs[5].CallID); err.Code != protocol.CodeConflict || !strings.Contains(err.Message, "quota_exceeded") {
		t.Errorf("restored, call 6: %s %q, want conflict, finished with quota_exceeded", err.Code, err.Message)
	}
	if err := lateError(r, outs[4].CallID); err.Code != protocol.CodeConflict || !strings.Contains(err.Message, "with a result") {
		t.Errorf("restored, call 5: %s %q, want conflict, finished with a result", err.Code, err.Message)
	}
	mine := finishedCalls(t, r, 1)
	if mine[0].CallID[:len(prefix)] == prefix {
		t.Fatalf("the restored session made id %q under the journal's prefix", mine[0].CallID)
	}
	if err := lateError(r, mine[0].CallID); err.Code != protocol.CodeConflict {
		t.Errorf("restored, its own call: %s %q, want conflict", err.Code, err.Message)
	}
}

// TestFinishedCodesPastTheTable: a session remembers at most 256
// distinct codes of finished calls (a peer's error results may each
// bring one of its own); a call that ended with a code past them is
// still told apart, as finished "with an error".
func TestFinishedCodesPastTheTable(t *testing.T) {
	s := session.New("f2", nil)
	i := 0
	h := session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		i++
		return nil, protocol.Errorf(protocol.Code(fmt.Sprintf("tool_code_%d", i)), "failed")
	})
	if err := s.RegisterAgent(agentCap("fail"), h); err != nil {
		t.Fatal(err)
	}
	for range 300 {
		s.Invoke(context.Background(), protocol.AudienceLLM, "fail", json.RawMessage(`{"text":"x"}`))
	}
	outs := only[*protocol.CapabilityOutcome](allEvents(t, s))
	for _, c := range []struct {
		i   int
		how string
	}{{0, "with tool_code_1;"}, {254, "with tool_code_255;"}, {255, "with an error;"}, {299, "with an error;"}} {
		if err := lateError(s, outs[c.i].CallID); err.Code != protocol.CodeConflict || !strings.Contains(err.Message, c.how) {
			t.Errorf("call %d: %s %q, want conflict, finished %s", c.i+1, err.Code, err.Message, c.how)
		}
	}
}
