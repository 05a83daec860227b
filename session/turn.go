package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"unicode/utf8"

	"github.com/brainrt/brain/protocol"
)

// MaxUserMessageBytes bounds the user message of a turn.
const MaxUserMessageBytes = 256 << 10

// keyTurn is the log attribute of a turn number.
const keyTurn = "turn"

// TurnRunner runs one turn of a session against a model: package driver
// provides one. It is called on its own goroutine when a turn starts (see
// [Session.SetTurnRunner]); ctx is cancelled when the turn is cancelled or
// ended from elsewhere. The turn ends with the returned reason; a non-nil
// error becomes the turn_ended event's error text.
type TurnRunner func(ctx context.Context, s *Session, turn int) (protocol.TurnReason, error)

// turnState is the current turn and the conversation. Guarded by
// Session.mu; its zero value is a session that has had no turn.
type turnState struct {
	active bool
	runner TurnRunner
	cancel context.CancelCauseFunc // of the running runner; nil when none runs
	done   chan struct{}           // closed when the active turn ends
	// The conversation: msgs[i] was added by conversation_message seq
	// meta[i].seq during turn meta[i].turn. Both are append-only: a
	// message is never modified or removed once added, so
	// ConversationMessages can hand out a prefix of msgs.
	msgs []protocol.ChatMessage
	meta []messageMeta
	// toolNames are the distinct tool names msgs mention, in the order
	// they first appeared (append-only too); toolNameSet holds them.
	toolNames   []string
	toolNameSet map[string]struct{}
	// records are the turns, in order: who started each and how it
	// ended (conversation.go); one per turn, as small as its events.
	records []TurnRecord
	// streamed is the assistant text streamed in the running turn's
	// current step (since its last assistant message), streamedSeq the
	// seq of its last assistant_delta: emptied when the step's message
	// is added and when the turn starts or ends.
	streamed    []byte
	streamedSeq uint64
}

// messageMeta is where a message of the conversation comes from.
type messageMeta struct {
	seq  uint64
	turn int
}

// turnCancelled is the cause of a runner's context when the turn was
// cancelled.
type turnCancelled struct{ reason string }

func (e *turnCancelled) Error() string {
	if e.reason == "" {
		return "the turn was cancelled"
	}
	return "the turn was cancelled: " + e.reason
}

var errTurnEnded = errors.New("the turn was ended")

// mayDriveTurns reports whether p may start, end and cancel turns: the
// client, an operator and the runtime.
func (p Peer) mayDriveTurns() bool {
	return p.Side == SideClient || p.Side == SideOperator || p.Side == SideRuntime
}

// SetTurnRunner makes r run every turn started from now on (nil: turns are
// run by whoever started them, and ended with [Session.EndTurn]). A turn
// already running keeps its runner.
func (s *Session) SetTurnRunner(r TurnRunner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns.runner = r
}

// StartTurn starts the next turn on behalf of p (the client, an operator or
// the runtime) and returns its number (turns count from 1). A non-empty
// message is the user's: it joins the conversation. When a [TurnRunner] is
// set the turn runs in the background and ends by itself; otherwise it stays
// open until [Session.EndTurn]. Starting a turn while one is running is a
// conflict, and nothing changes. Events: turn_started, then the user's
// conversation_message.
func (s *Session) StartTurn(p Peer, message string) (int, error) {
	if !p.mayDriveTurns() {
		return 0, protocol.Errorf(protocol.CodeForbidden, "%s may not start turns", p)
	}
	if len(message) > MaxUserMessageBytes {
		return 0, protocol.Errorf(protocol.CodeTooLarge, "the message is %d bytes, more than %d", len(message), MaxUserMessageBytes)
	}
	if !utf8.ValidString(message) {
		return 0, protocol.Errorf(protocol.CodeInvalidRequest, "the message is not valid UTF-8")
	}
	if err := s.checkValue("the message", "", []byte(message)); err != nil {
		return 0, err
	}
	s.mu.Lock()
	if s.turns.active {
		n := s.turn
		s.mu.Unlock()
		return 0, protocol.Errorf(protocol.CodeConflict, "turn %d is still running; cancel it (turn_cancel) or wait for its turn_ended", n)
	}
	s.turn++
	n := s.turn
	s.turns.active = true
	s.turns.done = make(chan struct{})
	s.emitLocked(entry{typ: protocol.TypeTurnStarted, msg: &protocol.TurnStarted{Turn: n, Message: message, StartedBy: p.String()}})
	s.turns.startedLocked(s.events.last, n, p.String())
	if message != "" {
		s.appendMessageLocked(n, protocol.ChatMessage{Role: protocol.RoleUser, Text: message})
	}
	r := s.turns.runner
	var ctx context.Context
	if r != nil {
		ctx, s.turns.cancel = context.WithCancelCause(context.Background())
	}
	s.mu.Unlock()
	s.logInfo("turn started", slog.Int(keyTurn, n), slog.String(keyPeer, p.String()))
	if r != nil {
		go s.runTurn(ctx, r, n)
	}
	return n, nil
}

// runTurn runs r for turn n and ends the turn with what it returns.
func (s *Session) runTurn(ctx context.Context, r TurnRunner, n int) {
	reason, err := func() (reason protocol.TurnReason, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.logError("turn runner panicked", slog.Int(keyTurn, n), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
				reason, err = protocol.TurnError, fmt.Errorf("the turn runner crashed; the session is unaffected")
			}
		}()
		return r(ctx, s, n)
	}()
	var tc *turnCancelled
	if errors.As(context.Cause(ctx), &tc) {
		reason, err = protocol.TurnCancelled, tc
	}
	detail := ""
	if err != nil {
		detail = err.Error()
	}
	s.FinishTurn(n, reason, detail)
}

// FinishTurn ends turn n like [Session.EndTurn] if it is the running turn,
// and reports whether it was; a turn already ended (cancelled, or ended by
// a peer) is left alone.
func (s *Session) FinishTurn(n int, reason protocol.TurnReason, detail string) bool {
	if reason == "" {
		reason = protocol.TurnCompleted
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.turns.active || s.turn != n {
		return false
	}
	s.endTurnLocked(n, reason, detail)
	return true
}

// EndTurn ends the current turn with reason (default completed) and detail
// (the turn_ended event's error text, "" for none), and returns its number.
// Every capability with scope "turn" is dropped with one
// capability_deregister event, then turn_ended is emitted. A runner still
// running the turn has its context cancelled. With no turn running, EndTurn
// ends an implicit next turn, so that a platform running its own model loop
// can call only EndTurn.
func (s *Session) EndTurn(reason protocol.TurnReason, detail string) int {
	if reason == "" {
		reason = protocol.TurnCompleted
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.turns.active {
		s.turn++
	}
	n := s.turn
	s.endTurnLocked(n, reason, detail)
	return n
}

func (s *Session) endTurnLocked(n int, reason protocol.TurnReason, detail string) {
	var names []string
	for name, r := range s.caps {
		if r.def[0].Scope == protocol.ScopeTurn {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	s.removeLocked(names)
	if s.turns.cancel != nil {
		s.turns.cancel(errTurnEnded)
		s.turns.cancel = nil
	}
	s.turns.active = false
	ended := &protocol.TurnEnded{Turn: n, Reason: reason, Error: cutText(detail, MaxTextBytes)}
	s.emitLocked(entry{typ: protocol.TypeTurnEnded, msg: ended})
	s.turns.endedLocked(s.events.last, ended)
	if s.turns.done != nil {
		close(s.turns.done)
		s.turns.done = nil
	}
	s.logInfo("turn ended", slog.Int(keyTurn, n), slog.String("reason", string(reason)))
}

// CancelTurn cancels the running turn. A runner's context is cancelled and
// the turn ends with reason cancelled once the runner returns; a turn
// without a runner ends at once. With no turn running it is a conflict.
func (s *Session) CancelTurn(reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.turns.active {
		return protocol.Errorf(protocol.CodeConflict, "no turn is running")
	}
	tc := &turnCancelled{reason: reason}
	if s.turns.cancel != nil {
		s.turns.cancel(tc)
		return nil
	}
	s.endTurnLocked(s.turn, protocol.TurnCancelled, tc.Error())
	return nil
}

// turnSnapshotLocked is the turn a snapshot carries: nil before the first.
func (s *Session) turnSnapshotLocked() *protocol.SnapshotTurn {
	if s.turn == 0 {
		return nil
	}
	return &protocol.SnapshotTurn{Turn: s.turn, Running: s.turns.active}
}

// CurrentTurn returns the number of the latest turn (0 before the first)
// and whether it is still running.
func (s *Session) CurrentTurn() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn, s.turns.active
}

// TurnDone returns a channel closed when the running turn ends; with no
// turn running the channel is closed already.
func (s *Session) TurnDone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.turns.done
}

// applyTurn applies the turn commands of the wire protocol.
func (s *Session) applyTurn(p Peer, m protocol.Message) (*protocol.Ack, error) {
	if !p.mayDriveTurns() {
		return nil, protocol.Errorf(protocol.CodeForbidden, "%s may not start, end or cancel turns", p)
	}
	switch m := m.(type) {
	case *protocol.TurnStart:
		_, err := s.StartTurn(p, m.Message)
		return &protocol.Ack{}, err
	case *protocol.TurnEnd:
		switch m.Reason {
		case "", protocol.TurnCompleted, protocol.TurnStepLimit, protocol.TurnError, protocol.TurnCancelled:
		case protocol.TurnInterrupted:
			return nil, protocol.Errorf(protocol.CodeInvalidRequest, "reason %q is the kernel's own", m.Reason)
		default:
			if !protocol.IsIdentifierCode(string(m.Reason)) {
				return nil, protocol.Errorf(protocol.CodeInvalidRequest, "reason %q is not identifier-shaped (a-z, 0-9, _ and ., starting with a letter)", m.Reason)
			}
		}
		s.EndTurn(m.Reason, "")
		return &protocol.Ack{}, nil
	case *protocol.TurnCancel:
		return &protocol.Ack{}, s.CancelTurn(m.Reason)
	}
	return nil, protocol.Errorf(protocol.CodeInvalidRequest, "%s is not a turn command", m.MessageType())
}

// replayTurnLocked rebuilds the turn and the conversation from one
// journaled event (see [Restore]).
func (s *Session) replayTurnLocked(seq uint64, m protocol.Message) {
	switch m := m.(type) {
	case *protocol.TurnStarted:
		s.turn = max(s.turn, m.Turn)
		s.turns.active = true
		s.turns.startedLocked(seq, m.Turn, m.StartedBy)
	case *protocol.TurnEnded:
		s.turn = max(s.turn, m.Turn)
		s.turns.active = false
		s.turns.endedLocked(seq, m)
	case *protocol.ConversationMessage:
		s.turns.addLocked(seq, m.Turn, m.Message)
	}
}

// endInterruptedTurn ends a turn the journal shows running: the process
// that ran it died. Calls the model made in it and that still wait (for an
// approval, a client) are cancelled, since nobody will read their outcome.
func (s *Session) endInterruptedTurn() {
	s.mu.Lock()
	if !s.turns.active {
		s.mu.Unlock()
		return
	}
	n := s.turn
	s.turns.done = make(chan struct{})
	s.mu.Unlock()
	for _, c := range s.Snapshot().PendingCalls {
		if c.Invoker == protocol.AudienceLLM {
			_ = s.Cancel(c.CallID, fmt.Sprintf("turn %d was interrupted by a kernel restart", n))
		}
	}
	s.mu.Lock()
	if s.turns.active && s.turn == n {
		s.endTurnLocked(n, protocol.TurnInterrupted, fmt.Sprintf("the kernel stopped during turn %d; the turn was ended when the session was restored", n))
	}
	s.mu.Unlock()
}
