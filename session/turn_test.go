package session_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

func TestTurnStartEnd(t *testing.T) {
	s := session.New("test", nil)
	turnCap := clientCap("t.x")
	turnCap.Scope = protocol.ScopeTurn
	if err := s.Register(session.Client, turnCap, clientCap("s.y")); err != nil {
		t.Fatal(err)
	}
	seq := s.LastSeq()
	n, err := s.StartTurn(session.Client, "hello")
	if err != nil || n != 1 {
		t.Fatalf("StartTurn = %d, %v; want 1, nil", n, err)
	}
	if got, active := s.CurrentTurn(); got != 1 || !active {
		t.Fatalf("CurrentTurn = %d, %v; want 1, true", got, active)
	}
	t.Run("a second start is a conflict and changes nothing", func(t *testing.T) {
		before := s.LastSeq()
		_, err := s.StartTurn(session.Client, "again")
		wantErrCode(t, err, protocol.CodeConflict)
		if s.LastSeq() != before {
			t.Fatal("a refused StartTurn emitted events")
		}
	})
	if got := s.EndTurn(protocol.TurnCompleted, ""); got != 1 {
		t.Fatalf("EndTurn = %d, want 1", got)
	}
	evs := eventsAfter(t, s, seq)
	want := []protocol.Type{protocol.TypeTurnStarted, protocol.TypeConversationMessage, protocol.TypeCapabilityDeregister, protocol.TypeTurnEnded}
	if !slices.Equal(types(evs), want) {
		t.Fatalf("events %v, want %v", types(evs), want)
	}
	if d := evs[2].Msg.(*protocol.CapabilityDeregister); !slices.Equal(d.Names, []string{"t.x"}) {
		t.Fatalf("deregistered %v, want [t.x]", d.Names)
	}
	if e := evs[3].Msg.(*protocol.TurnEnded); e.Turn != 1 || e.Reason != protocol.TurnCompleted {
		t.Fatalf("turn_ended %+v", e)
	}
	conv := s.Conversation()
	if len(conv) != 1 || conv[0].Message.Role != protocol.RoleUser || conv[0].Message.Text != "hello" || conv[0].Turn != 1 {
		t.Fatalf("conversation %+v", conv)
	}
	if err := s.AppendMessage(1, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "late"}); err == nil {
		t.Fatal("a message for an ended turn was added")
	}
}

func TestTurnRefusals(t *testing.T) {
	tests := []struct {
		name string
		p    session.Peer
		msg  protocol.Message
		code protocol.Code
	}{
		{"an app starts a turn", session.App("a"), &protocol.TurnStart{Message: "x"}, protocol.CodeForbidden},
		{"an environment ends a turn", session.Environment, &protocol.TurnEnd{}, protocol.CodeForbidden},
		{"cancel with no turn", session.Client, &protocol.TurnCancel{}, protocol.CodeConflict},
		{"a reason that is not an identifier", session.Client, &protocol.TurnEnd{Reason: "Bad Reason"}, protocol.CodeInvalidRequest},
		{"the kernel's own reason", session.Client, &protocol.TurnEnd{Reason: protocol.TurnInterrupted}, protocol.CodeInvalidRequest},
		{"a message that is not UTF-8", session.Client, &protocol.TurnStart{Message: "\xff"}, protocol.CodeInvalidRequest},
		{"a message too large", session.Client, &protocol.TurnStart{Message: strings.Repeat("a", session.MaxUserMessageBytes+1)}, protocol.CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			reply := s.HandleFrame(tt.p, &protocol.Frame{ID: "1", Msg: tt.msg})
			er, ok := reply.Msg.(*protocol.ErrorReply)
			if !ok || er.Code != tt.code {
				t.Fatalf("reply %s, want error %s", jsonOf(t, reply.Msg), tt.code)
			}
			if s.LastSeq() != 0 {
				t.Fatalf("a refused command emitted %d events", s.LastSeq())
			}
		})
	}
}

// TestTurnOverTheWire: a platform that runs its own model loop uses
// turn_start and turn_end; turn_end alone ends an implicit turn.
func TestTurnOverTheWire(t *testing.T) {
	s := session.New("test", nil)
	for _, m := range []protocol.Message{&protocol.TurnStart{}, &protocol.TurnEnd{Reason: "handed_off"}, &protocol.TurnEnd{}} {
		if r := s.HandleFrame(session.Operator("ada"), &protocol.Frame{Msg: m}); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatalf("%s: %s", m.MessageType(), jsonOf(t, r.Msg))
		}
	}
	ends := only[*protocol.TurnEnded](allEvents(t, s))
	if len(ends) != 2 || ends[0].Turn != 1 || ends[0].Reason != "handed_off" || ends[1].Turn != 2 || ends[1].Reason != protocol.TurnCompleted {
		t.Fatalf("turn_ended events %s", jsonOf(t, ends))
	}
	started := only[*protocol.TurnStarted](allEvents(t, s))
	if len(started) != 1 || started[0].StartedBy != "operator (ada)" {
		t.Fatalf("turn_started events %s", jsonOf(t, started))
	}
}

// TestTurnRunner: a runner runs the turn a peer starts; cancelling the turn
// cancels its context and the turn ends cancelled; a runner that panics
// ends its turn with error.
func TestTurnRunner(t *testing.T) {
	t.Run("completes", func(t *testing.T) {
		s := session.New("test", nil)
		s.SetTurnRunner(func(ctx context.Context, s *session.Session, turn int) (protocol.TurnReason, error) {
			if !s.StreamText(turn, "hi") {
				t.Error("StreamText refused the running turn")
			}
			return protocol.TurnCompleted, s.AppendMessage(turn, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "hi"})
		})
		sub := watch(t, s)
		if r := s.HandleFrame(session.Client, &protocol.Frame{Msg: &protocol.TurnStart{Message: "hello"}}); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatal(jsonOf(t, r.Msg))
		}
		e, _ := waitFor[*protocol.TurnEnded](t, sub, nil)
		if e.Reason != protocol.TurnCompleted || e.Error != "" {
			t.Fatalf("turn_ended %+v", e)
		}
		if conv := s.Conversation(); len(conv) != 2 || conv[1].Message.Text != "hi" {
			t.Fatalf("conversation %s", jsonOf(t, conv))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s := session.New("test", nil)
		started := make(chan struct{})
		s.SetTurnRunner(func(ctx context.Context, s *session.Session, turn int) (protocol.TurnReason, error) {
			close(started)
			<-ctx.Done()
			return protocol.TurnError, ctx.Err()
		})
		sub := watch(t, s)
		if _, err := s.StartTurn(session.Client, "hello"); err != nil {
			t.Fatal(err)
		}
		recv(t, started, "the runner to start")
		if r := s.HandleFrame(session.Client, &protocol.Frame{Msg: &protocol.TurnCancel{Reason: "stop"}}); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatal(jsonOf(t, r.Msg))
		}
		e, _ := waitFor[*protocol.TurnEnded](t, sub, nil)
		if e.Reason != protocol.TurnCancelled || !strings.Contains(e.Error, "stop") {
			t.Fatalf("turn_ended %+v, want cancelled naming the reason", e)
		}
	})
	t.Run("cancelled while its call awaits approval", func(t *testing.T) {
		// The call's outcome says the turn was cancelled and why, where it
		// said "the caller went away" (the console's probe cancelled it).
		s := session.New("test", nil)
		if err := s.Register(session.Client, jClientCap("c.ask", true)); err != nil {
			t.Fatal(err)
		}
		s.SetTurnRunner(func(ctx context.Context, s *session.Session, turn int) (protocol.TurnReason, error) {
			s.Invoke(ctx, protocol.AudienceLLM, "c.ask", json.RawMessage(`{}`))
			return protocol.TurnError, ctx.Err()
		})
		sub := watch(t, s)
		if _, err := s.StartTurn(session.Client, "hello"); err != nil {
			t.Fatal(err)
		}
		waitFor[*protocol.ApprovalRequested](t, sub, nil)
		if err := s.CancelTurn("cancelled from the console by ada"); err != nil {
			t.Fatal(err)
		}
		out, _ := waitFor[*protocol.CapabilityOutcome](t, sub, nil)
		if want := "the turn was cancelled: cancelled from the console by ada while the call awaited approval; it did not run"; out.Outcome.Err == nil || out.Outcome.Err.Message != want {
			t.Fatalf("the call's outcome %+v, want %q", out.Outcome, want)
		}
	})
	t.Run("panics", func(t *testing.T) {
		s := session.New("test", nil)
		s.SetTurnRunner(func(context.Context, *session.Session, int) (protocol.TurnReason, error) { panic("boom") })
		sub := watch(t, s)
		if _, err := s.StartTurn(session.Client, "hello"); err != nil {
			t.Fatal(err)
		}
		e, _ := waitFor[*protocol.TurnEnded](t, sub, nil)
		if e.Reason != protocol.TurnError || !strings.Contains(e.Error, "crashed") {
			t.Fatalf("turn_ended %+v", e)
		}
	})
}

// TestTurnRestore: the journal keeps turns and the conversation; a turn
// running when the process died ends as interrupted on restore, and the
// model's call awaiting approval in it is cancelled.
func TestTurnRestore(t *testing.T) {
	j := &memJournal{}
	s := session.New("test", &session.Options{Journal: j})
	if err := s.Register(session.Client, jClientCap("c.ask", true)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartTurn(session.Client, "first"); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.AppendMessage(1, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "one"}))
	s.EndTurn(protocol.TurnCompleted, "")
	if _, err := s.StartTurn(session.Client, "second"); err != nil {
		t.Fatal(err)
	}
	must(s.AppendMessage(2, protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "k1", Name: "c.ask", Input: json.RawMessage(`{}`)}}}))
	sub := watch(t, s)
	go s.Invoke(context.Background(), protocol.AudienceLLM, "c.ask", json.RawMessage(`{}`))
	waitFor[*protocol.ApprovalRequested](t, sub, nil)
	// The process dies here: restore from what the journal holds.
	r, err := session.Restore("test", j.events(t), &session.Options{Journal: j}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, active := r.CurrentTurn(); n != 2 || active {
		t.Fatalf("after restore CurrentTurn = %d, %v; want 2, false", n, active)
	}
	evs := j.events(t)
	ends := only[*protocol.TurnEnded](evs)
	if len(ends) != 2 || ends[1].Turn != 2 || ends[1].Reason != protocol.TurnInterrupted || !strings.Contains(ends[1].Error, "kernel stopped") {
		t.Fatalf("turn_ended events %s, want the second interrupted", jsonOf(t, ends))
	}
	outs := only[*protocol.CapabilityOutcome](evs)
	if len(outs) != 1 || outs[0].Outcome.Err == nil || outs[0].Outcome.Err.Code != protocol.CodeCancelled {
		t.Fatalf("outcomes %s, want the pending llm call cancelled", jsonOf(t, outs))
	}
	conv := r.Conversation()
	var texts []string
	for _, e := range conv {
		texts = append(texts, string(e.Message.Role)+":"+e.Message.Text)
	}
	if want := []string{"user:first", "assistant:one", "user:second", "assistant:"}; !slices.Equal(texts, want) {
		t.Fatalf("restored conversation %q, want %q", texts, want)
	}
	if n, err := r.StartTurn(session.Client, "third"); err != nil || n != 3 {
		t.Fatalf("the next turn after restore: %d, %v; want 3", n, err)
	}
}

// TestSnapshotTurn: a snapshot carries the latest turn and whether it is
// running, so a peer that resumes from one knows the turn state; a restore
// of a session that died mid-turn snapshots the turn ended.
func TestSnapshotTurn(t *testing.T) {
	j := &memJournal{}
	s := session.New("test", &session.Options{Journal: j})
	snap := func(s *session.Session) *protocol.SnapshotTurn {
		t.Helper()
		// Through the wire encoding, as a peer gets it.
		b, err := protocol.EncodeFrame(&protocol.Frame{Seq: s.LastSeq(), Msg: s.Snapshot()})
		if err != nil {
			t.Fatal(err)
		}
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		return f.Msg.(*protocol.Snapshot).Turn
	}
	if got := snap(s); got != nil {
		t.Fatalf("before any turn the snapshot has turn %+v", got)
	}
	for _, tt := range []struct {
		name string
		do   func(*testing.T) *session.Session
		want protocol.SnapshotTurn
	}{
		{"running", func(t *testing.T) *session.Session {
			if _, err := s.StartTurn(session.Client, "one"); err != nil {
				t.Fatal(err)
			}
			return s
		}, protocol.SnapshotTurn{Turn: 1, Running: true}},
		{"ended", func(*testing.T) *session.Session { s.EndTurn(protocol.TurnCompleted, ""); return s }, protocol.SnapshotTurn{Turn: 1}},
		{"the next one running", func(t *testing.T) *session.Session {
			if _, err := s.StartTurn(session.Client, "two"); err != nil {
				t.Fatal(err)
			}
			return s
		}, protocol.SnapshotTurn{Turn: 2, Running: true}},
		{"restored after the kernel died in it", func(t *testing.T) *session.Session {
			r, err := session.Restore("test", j.events(t), &session.Options{Journal: j}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, protocol.SnapshotTurn{Turn: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := snap(tt.do(t)); got == nil || *got != tt.want {
				t.Fatalf("snapshot turn %+v, want %+v", got, tt.want)
			}
		})
	}
}
