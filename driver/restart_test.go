package driver_test

import (
	"strings"
	"testing"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// TestRestartMidTurn: the kernel stops in the middle of a turn (the model
// asked for a call that waits for approval) with its sessions in the
// embedded JetStream store; the store is reopened and the session restored
// from it, as `brain serve` does on its next start. The conversation is
// intact, the interrupted turn is ended with a clear reason, the waiting
// call is cancelled, and the next turn sends the model the whole
// conversation, the unanswered call repaired. (A store-backed restore in
// one process, not a SIGKILL of a real serve: store's own crash test covers
// the journal surviving a kill.)
func TestRestartMidTurn(t *testing.T) {
	ctx := testutil.Context(t)
	dir := t.TempDir()
	st, err := store.Open(ctx, &store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.Journal("s1")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, stub: newStub(t, "openai_restart.txt"), journal: &textJournal{}, logs: &strings.Builder{}}
	f.s = session.New("s1", &session.Options{Journal: j})
	f.register()
	m, err := driver.NewOpenAI(driver.ProviderOptions{BaseURL: f.stub.url() + "/v1", Model: "stub-model"})
	if err != nil {
		t.Fatal(err)
	}
	d := driver.New(m, nil)
	d.Attach(f.s)
	sub := f.s.Subscribe(f.s.LastSeq())
	if _, err := f.s.StartTurn(session.Client, "delete my notes"); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ev.Msg.(*protocol.ApprovalRequested); ok {
			break
		}
	}
	sub.Close()
	// The process dies: nothing after this point reaches the store.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := store.Open(ctx, &store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	events, err := st2.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	j2, err := st2.Journal("s1")
	if err != nil {
		t.Fatal(err)
	}
	g := &fixture{t: t, stub: f.stub, journal: &textJournal{}, logs: &strings.Builder{}}
	g.s, err = session.Restore("s1", events, &session.Options{Journal: j2}, func(s *session.Session) error {
		g.s = s
		g.register()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, running := g.s.CurrentTurn(); n != 1 || running {
		t.Fatalf("restored CurrentTurn = %d, %v; want 1, ended", n, running)
	}
	var ended *protocol.TurnEnded
	sub2 := g.s.Subscribe(0)
	defer sub2.Close()
	for ended == nil {
		ev, err := sub2.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ended, _ = ev.Msg.(*protocol.TurnEnded)
	}
	wantReason(t, ended, protocol.TurnInterrupted, "the kernel stopped during turn 1")
	g.wantTranscript(
		"user: delete my notes",
		`assistant:  [call_1 notes.delete {"path":"notes.txt"}]`,
	)
	if p := g.s.Snapshot().PendingCalls; len(p) != 0 {
		t.Fatalf("pending calls after restore: %+v", p)
	}

	d2 := driver.New(m, nil)
	reason, err := d2.Turn(ctx, g.s, "go on")
	if reason != protocol.TurnCompleted || err != nil {
		t.Fatalf("the next turn: %s, %v", reason, err)
	}
	req := f.stub.requestJSON(1)
	for _, want := range []string{`"content":"delete my notes"`, `"id":"call_1"`, `"tool_call_id":"call_1"`, `"content":"go on"`} {
		if !strings.Contains(req, want) {
			t.Fatalf("the request after the restart lacks %s: %s", want, req)
		}
	}
	g.wantTranscript(
		"user: delete my notes",
		`assistant:  [call_1 notes.delete {"path":"notes.txt"}]`,
		"user: go on",
		"assistant: Continuing where we were.",
	)
}
