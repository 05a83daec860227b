package session_test

import (
	"reflect"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestTurnRecords: the session keeps each turn's start (who, at which seq)
// and end (reason, error, seq) as its events said, and the text the running
// step has streamed so far; ConversationAfter answers them as of one seq,
// and only what came after a given seq; a journal restore rebuilds the
// records, ending a running turn as interrupted.
func TestTurnRecords(t *testing.T) {
	j := &memJournal{}
	s := session.New("turns", &session.Options{Journal: j})
	seqOf := func(evs []session.Event, match func(protocol.Message) bool) uint64 {
		t.Helper()
		for _, e := range evs {
			if match(e.Msg) {
				return e.Seq
			}
		}
		t.Fatal("no such event")
		return 0
	}
	started := func(n int) func(protocol.Message) bool {
		return func(m protocol.Message) bool { ts, ok := m.(*protocol.TurnStarted); return ok && ts.Turn == n }
	}
	ended := func(n int) func(protocol.Message) bool {
		return func(m protocol.Message) bool { te, ok := m.(*protocol.TurnEnded); return ok && te.Turn == n }
	}
	streaming := func(st session.ConversationState) string {
		if st.Streaming == nil {
			return "<none>"
		}
		return st.Streaming.Text
	}

	// Turn 1, started by an operator, streams two steps and fails.
	if _, err := s.StartTurn(session.Operator("ada"), "hi"); err != nil {
		t.Fatal(err)
	}
	if got := streaming(s.ConversationAfter(0)); got != "<none>" {
		t.Fatalf("streamed before any delta: %q", got)
	}
	s.StreamText(1, "Hel")
	s.StreamText(1, "lo")
	st := s.ConversationAfter(0)
	if st.Streaming == nil || st.Streaming.Text != "Hello" || st.Streaming.Turn != 1 || st.Streaming.Seq != s.LastSeq() || st.Seq != s.LastSeq() {
		t.Fatalf("streaming %+v at seq %d, want Hello up to %d", st.Streaming, st.Seq, s.LastSeq())
	}
	if err := s.AppendMessage(1, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "Hello"}); err != nil {
		t.Fatal(err)
	}
	if got := streaming(s.ConversationAfter(0)); got != "<none>" {
		t.Fatalf("the step's message is added, yet streamed %q", got)
	}
	s.StreamText(1, "wor")
	if got := streaming(s.ConversationAfter(0)); got != "wor" {
		t.Fatalf("the next step streamed %q, want wor", got)
	}
	if !s.FinishTurn(1, protocol.TurnError, "the model went away") {
		t.Fatal("turn 1 was not running")
	}
	if got := streaming(s.ConversationAfter(0)); got != "<none>" {
		t.Fatalf("the turn ended, yet streamed %q", got)
	}
	// Turn 2 by the runtime, completed; turn 3 ended without a start;
	// turn 4 runs.
	if _, err := s.StartTurn(session.Runtime, ""); err != nil {
		t.Fatal(err)
	}
	s.EndTurn("", "")
	s.EndTurn(protocol.TurnStepLimit, "")
	if _, err := s.StartTurn(session.Operator("bob"), "more"); err != nil {
		t.Fatal(err)
	}
	s.StreamText(4, "so far")

	evs := allEvents(t, s)
	op := only[*protocol.TurnStarted](evs)[0].StartedBy
	want := []session.TurnRecord{
		{Turn: 1, Seq: seqOf(evs, started(1)), StartedBy: op, Reason: protocol.TurnError, Error: "the model went away", EndSeq: seqOf(evs, ended(1))},
		{Turn: 2, Seq: seqOf(evs, started(2)), StartedBy: session.Runtime.String(), Reason: protocol.TurnCompleted, EndSeq: seqOf(evs, ended(2))},
		{Turn: 3, Reason: protocol.TurnStepLimit, EndSeq: seqOf(evs, ended(3))},
		{Turn: 4, Seq: seqOf(evs, started(4)), StartedBy: only[*protocol.TurnStarted](evs)[2].StartedBy},
	}
	if op == "" || want[3].StartedBy == op {
		t.Fatalf("startedBy %q and %q", op, want[3].StartedBy)
	}
	for _, tt := range []struct {
		name  string
		after uint64
		turns []session.TurnRecord
		msgs  int
	}{
		{"all", 0, want, 3},
		{"after turn 1 ended", want[0].EndSeq, want[1:], 1},
		{"after turn 3 ended: the running turn", want[2].EndSeq, want[3:], 1},
		{"after the latest event: the running turn still", s.LastSeq(), want[3:], 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := s.ConversationAfter(tt.after)
			if !reflect.DeepEqual(st.Turns, tt.turns) {
				t.Errorf("turns\n%+v\nwant\n%+v", st.Turns, tt.turns)
			}
			if len(st.Messages) != tt.msgs {
				t.Errorf("%d messages, want %d", len(st.Messages), tt.msgs)
			}
			for _, m := range st.Messages {
				if m.Seq <= tt.after {
					t.Errorf("message of seq %d, asked after %d", m.Seq, tt.after)
				}
			}
			if st.Turn != 4 || !st.Running || streaming(st) != "so far" || st.Seq != s.LastSeq() {
				t.Errorf("turn %d running %v streaming %q seq %d", st.Turn, st.Running, streaming(st), st.Seq)
			}
		})
	}
	if got := s.Turns(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Turns()\n%+v\nwant\n%+v", got, want)
	}

	t.Run("after a restore", func(t *testing.T) {
		r, err := session.Restore("turns", j.events(t), &session.Options{Journal: &memJournal{}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := r.ConversationAfter(0)
		interrupted := only[*protocol.TurnEnded](allEvents(t, r))
		if len(interrupted) == 0 || interrupted[len(interrupted)-1].Reason != protocol.TurnInterrupted {
			t.Fatalf("turn 4 was not ended as interrupted: %+v", interrupted)
		}
		restored := append([]session.TurnRecord(nil), want...)
		restored[3].Reason, restored[3].Error, restored[3].EndSeq = protocol.TurnInterrupted, interrupted[len(interrupted)-1].Error, r.LastSeq()
		if !reflect.DeepEqual(got.Turns, restored) {
			t.Fatalf("restored turns\n%+v\nwant\n%+v", got.Turns, restored)
		}
		if got.Streaming != nil || got.Running || len(got.Messages) != 3 {
			t.Fatalf("restored: streaming %+v, running %v, %d messages", got.Streaming, got.Running, len(got.Messages))
		}
	})
}
