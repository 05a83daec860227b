package session_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// closingJournal takes events until closed, then refuses them all as a
// stopping process's journal does.
type closingJournal struct {
	memJournal
	closed atomic.Bool
}

func (j *closingJournal) Append(e session.Event) error {
	if j.closed.Load() {
		return fmt.Errorf("store: %w", session.ErrJournalClosed)
	}
	return j.memJournal.Append(e)
}

// messages is a slog handler that passes each record's message on.
type messages chan string

func (m messages) Enabled(context.Context, slog.Level) bool { return true }
func (m messages) Handle(_ context.Context, r slog.Record) error {
	select {
	case m <- r.Message:
	default:
	}
	return nil
}
func (m messages) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m messages) WithGroup(string) slog.Handler      { return m }

// TestStopLogsCallsLeftPending: a call whose caller goes away once the
// journal is closed (a stop) ends in memory only — the store keeps it
// pending, and a restart resumes it — and the log says so, where it said
// "call finished" with code cancelled (a probe took that for the call's
// end).
func TestStopLogsCallsLeftPending(t *testing.T) {
	logged := make(messages, 64)
	j := &closingJournal{}
	s := session.New("stopping", &session.Options{Journal: j, Logger: slog.New(logged)})
	countingCap(t, s, "fs.delete")
	sub := watch(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan protocol.Outcome, 1)
	go func() { done <- s.Invoke(ctx, protocol.AudienceLLM, "fs.delete", textInput) }()
	waitFor[*protocol.ApprovalRequested](t, sub, nil)
	j.closed.Store(true)
	cancel() // the caller goes with the process
	if out := recv(t, done, "outcome"); out.Err == nil || out.Err.Code != protocol.CodeCancelled {
		t.Fatalf("outcome %+v, want cancelled", out)
	}
	for {
		switch m := testutil.Recv(t, logged, "the call's log line"); m {
		case "call finished":
			t.Fatalf("logged %q for a call the store keeps pending", m)
		case "call left pending: its end was not journaled (the node is stopping, or the session's journal failed), and the session resumes it when it is loaded again":
			return
		}
	}
}
