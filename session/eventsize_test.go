package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// smallJournal is a memJournal that refuses, as a store does, every event
// whose frame is over limit bytes, before storing it.
type smallJournal struct {
	memJournal
	limit int
}

func (j *smallJournal) Append(e session.Event) error {
	b, err := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
	if err != nil {
		return err
	}
	if len(b) > j.limit {
		return &session.EventTooLargeError{Type: e.Msg.MessageType(), Size: len(b), Limit: j.limit}
	}
	return j.memJournal.Append(e)
}

// TestEventBounds: inputs that would make an event over MaxEventBytes are
// refused with too_large before anyone sees an event: a call's input, its
// result (the caller gets the same too_large its outcome event says), a
// registration, a conversation message, a user message that JSON escaping
// grows past the limit.
func TestEventBounds(t *testing.T) {
	const limit = 64 << 10 // the smallest MaxEventBytes
	value := func(n int) json.RawMessage { return json.RawMessage(`{"text":"` + strings.Repeat("x", n) + `"}`) }
	s := session.New("bounds", &session.Options{MaxEventBytes: limit})
	echo := protocol.Capability{Name: "echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
	var answer json.RawMessage
	if err := s.RegisterAgent(echo, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return answer, nil })); err != nil {
		t.Fatal(err)
	}
	sub := watch(t, s)
	seq := s.LastSeq()
	wantTooLarge := func(what string, err error, names string) {
		t.Helper()
		var c protocol.Coder
		if err == nil || !errors.As(err, &c) || c.ErrorCode() != protocol.CodeTooLarge || !strings.Contains(err.Error(), "over the limit") || !strings.Contains(err.Error(), ": "+names+" is ") {
			t.Fatalf("%s: %v, want too_large naming %s and the limit", what, err, names)
		}
	}
	out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", value(limit))
	wantTooLarge("an input over the limit", out.Err, `the input for "echo"`)
	if s.LastSeq() != seq {
		t.Fatal("a refused input emitted an event")
	}
	answer = json.RawMessage(`"` + strings.Repeat("<", limit/6+1) + `"`) // small as bytes, over the limit escaped
	out = s.Invoke(context.Background(), protocol.AudienceLLM, "echo", value(10))
	wantTooLarge("a result over the limit once escaped", out.Err, `the result of "echo"`)
	o, _ := waitFor[*protocol.CapabilityOutcome](t, sub, nil)
	if o.Outcome.Err == nil || o.Outcome.Err.Code != protocol.CodeTooLarge {
		t.Fatalf("the outcome event %+v, want the caller's too_large", o.Outcome)
	}
	big := protocol.Capability{Name: "ui.big", Description: strings.Repeat("d", limit), InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}}
	wantTooLarge("a registration over the limit", s.Register(session.Client, big), "the registration")
	_, err := s.StartTurn(session.Client, strings.Repeat("&", limit/6+1))
	wantTooLarge("a user message over the limit once escaped", err, "the message")
}

// TestJournalRefusalIsNotVisible: when the journal refuses an event for
// its size anyway (its limit is below MaxEventBytes), a call's outcome is
// replaced by a too_large error — in the journal, for subscribers and for
// the caller alike — and later events are stored as before.
func TestJournalRefusalIsNotVisible(t *testing.T) {
	j := &smallJournal{limit: 8 << 10}
	s := session.New("refused", &session.Options{Journal: j})
	echo := protocol.Capability{Name: "echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
	if err := s.RegisterAgent(echo, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })); err != nil {
		t.Fatal(err)
	}
	sub := watch(t, s)
	out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", json.RawMessage(`{"a":"`+strings.Repeat("x", 4<<10)+`"}`))
	if !out.IsOK() {
		t.Fatalf("a call that fits: %+v", out.Err)
	}
	// The input fits its capability_invoked? Agent calls emit none: only
	// the outcome carries the value, which the journal refuses.
	out = s.Invoke(context.Background(), protocol.AudienceLLM, "echo", json.RawMessage(`{"a":"`+strings.Repeat("x", 9<<10)+`"}`))
	if out.Err == nil || out.Err.Code != protocol.CodeTooLarge {
		t.Fatalf("the caller got %+v, want the too_large its event says", out)
	}
	var last *protocol.CapabilityOutcome
	for range 2 {
		last, _ = waitFor[*protocol.CapabilityOutcome](t, sub, nil)
	}
	if last.Outcome.Err == nil || last.Outcome.Err.Code != protocol.CodeTooLarge {
		t.Fatalf("subscribers saw %+v", last.Outcome)
	}
	if _, err := s.StartTurn(session.Client, "hello"); err != nil {
		t.Fatal(err)
	}
	got := j.events(t)
	if len(got) == 0 || got[len(got)-1].Seq != s.LastSeq() {
		t.Fatalf("the journal holds up to seq %d, the session is at %d", got[len(got)-1].Seq, s.LastSeq())
	}
	for i, e := range got {
		if e.Seq != got[0].Seq+uint64(i) {
			t.Fatalf("the journal's seqs have a gap at %d", e.Seq)
		}
	}
}
