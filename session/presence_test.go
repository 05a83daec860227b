package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestCallsToGonePeers (issue 15): a call to a capability whose owner has
// no connection waits at most PeerGrace for it to come back, then fails
// with unavailable naming the owner; later calls fail at once.
func TestCallsToGonePeers(t *testing.T) {
	const grace = 5 * time.Second
	calendar := session.App("calendar")
	setup := func(t *testing.T) *session.Session {
		s := session.New("gone", nil) // PeerGrace: the 5 s default
		if err := s.Register(session.Client, clientCap("ui.show")); err != nil {
			t.Fatal(err)
		}
		if err := s.Register(calendar, appCap("calendar", "cal.add")); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// answerWhenInvoked answers the first capability_invoked with result.
	answer := func(t *testing.T, s *session.Session, p session.Peer, sub *session.Subscription) {
		inv, _ := waitFor[*protocol.CapabilityInvoked](t, sub, nil)
		if err := s.Result(p, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{"ok":1}`)}); err != nil {
			t.Error(err)
		}
	}
	for _, tc := range []struct {
		name string
		peer session.Peer
		cap  string
		says string
	}{{"client", session.Client, "ui.show", "client"}, {"app", calendar, "cal.add", "app calendar"}} {
		t.Run(tc.name+"/reconnects within the grace", func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				s := setup(t)
				s.Attach(tc.peer)
				s.Detach(tc.peer)
				sub := watch(t, s)
				done := make(chan protocol.Outcome, 1)
				go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, tc.cap, textInput) }()
				time.Sleep(grace - time.Second)
				if n := s.Attach(tc.peer); n != 1 {
					t.Errorf("Attach = %d, want 1", n)
				}
				answer(t, s, tc.peer, sub)
				time.Sleep(time.Hour) // the grace timer must not end the call later
				if out := recv(t, done, "outcome"); !out.IsOK() {
					t.Fatalf("outcome %+v", out.Err)
				}
			})
		})
		t.Run(tc.name+"/does not come back", func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				s := setup(t)
				s.Attach(tc.peer)
				start := time.Now()
				done := make(chan protocol.Outcome, 1)
				go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, tc.cap, textInput) }()
				synctest.Wait() // dispatched to a live peer, which then leaves
				if n := s.Detach(tc.peer); n != 0 {
					t.Errorf("Detach = %d, want 0", n)
				}
				out := <-done // in the bubble: a deadlock fails the test
				wantCode(t, out, protocol.CodeUnavailable)
				if d := time.Since(start); d != grace {
					t.Errorf("failed after %s, want the grace of %s", d, grace)
				}
				if !strings.Contains(out.Err.Message, tc.says) || !strings.Contains(out.Err.Message, tc.cap) {
					t.Errorf("message %q does not name the owner %q and the capability", out.Err.Message, tc.says)
				}
				// Once the grace is over, a call fails at once, undispatched.
				seq := s.LastSeq()
				start = time.Now()
				out = s.Invoke(context.Background(), protocol.AudienceLLM, tc.cap, textInput)
				wantCode(t, out, protocol.CodeUnavailable)
				if d := time.Since(start); d != 0 {
					t.Errorf("a call after the grace took %s", d)
				}
				for _, ev := range eventsAfter(t, s, seq) {
					if ev.Msg.MessageType() == protocol.TypeCapabilityInvoked {
						t.Errorf("a call to a gone peer was dispatched: %s", jsonOf(t, ev.Msg))
					}
				}
			})
		})
	}
	t.Run("two connections: one leaving is not gone", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s := setup(t)
			s.Attach(session.Client)
			s.Attach(session.Client)
			if n := s.Detach(session.Client); n != 1 {
				t.Fatalf("Detach = %d, want 1", n)
			}
			sub := watch(t, s)
			done := make(chan protocol.Outcome, 1)
			go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "ui.show", textInput) }()
			time.Sleep(time.Minute / 2)
			answer(t, s, session.Client, sub)
			if out := recv(t, done, "outcome"); !out.IsOK() {
				t.Fatalf("outcome %+v", out.Err)
			}
		})
	})
	t.Run("Options.PeerGrace negative: no grace", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			s := session.New("gone", &session.Options{PeerGrace: -1})
			if err := s.Register(session.Client, clientCap("ui.show")); err != nil {
				t.Fatal(err)
			}
			s.Attach(session.Client)
			s.Detach(session.Client)
			wantCode(t, s.Invoke(context.Background(), protocol.AudienceLLM, "ui.show", textInput), protocol.CodeUnavailable)
		})
	})
	t.Run("restored owner that never reconnects", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			j := &memJournal{}
			s := session.New("gone", &session.Options{Journal: j})
			if err := s.Register(session.Client, clientCap("ui.show")); err != nil {
				t.Fatal(err)
			}
			id, perr := s.Start(protocol.AudienceLLM, "ui.show", textInput)
			if perr != nil {
				t.Fatal(perr)
			}
			synctest.Wait()
			r, err := session.Restore("gone", j.events(t), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			sub := r.Subscribe(r.LastSeq())
			defer sub.Close()
			start := time.Now()
			ev, err := sub.Next(context.Background()) // in the bubble: a deadlock fails the test
			if err != nil {
				t.Fatal(err)
			}
			o, ok := ev.Msg.(*protocol.CapabilityOutcome)
			if !ok || o.CallID != id {
				t.Fatalf("first event after the restore: %s", jsonOf(t, ev.Msg))
			}
			wantCode(t, o.Outcome, protocol.CodeUnavailable)
			if d := time.Since(start); d != grace {
				t.Errorf("failed after %s, want %s", d, grace)
			}
			_ = s.Cancel(id, "")
		})
	})
}

// TestQuotas: MaxCapabilities and MaxPendingCalls refuse with
// quota_exceeded, change nothing, and the session keeps serving.
func TestQuotas(t *testing.T) {
	t.Run("capabilities", func(t *testing.T) {
		s := session.New("q", &session.Options{MaxCapabilities: 3})
		if err := s.Register(session.Client, clientCap("a"), clientCap("b")); err != nil {
			t.Fatal(err)
		}
		seq := s.LastSeq()
		err := s.Register(session.Client, clientCap("c"), clientCap("d"))
		wantErrCode(t, err, protocol.CodeQuotaExceeded)
		if !strings.Contains(err.Error(), "MaxCapabilities") || !strings.Contains(err.Error(), "3") {
			t.Errorf("error %q does not name the quota and its limit", err)
		}
		if s.LastSeq() != seq || len(s.List(protocol.AudienceLLM)) != 3 { // a, b and the built-in
			t.Fatal("a refused registration changed the session")
		}
		changed := clientCap("a")
		changed.Description = "Replaced."
		if err := s.Register(session.Client, changed, clientCap("c")); err != nil {
			t.Fatalf("a replacement and one more, within the limit: %v", err)
		}
		wantErrCode(t, s.RegisterAgent(agentCap("e"), echo), protocol.CodeQuotaExceeded)
	})
	t.Run("pending calls", func(t *testing.T) {
		s := session.New("q", &session.Options{MaxPendingCalls: 2})
		if err := s.Register(session.Client, clientCap("ui.show")); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterAgent(agentCap("echo"), echo); err != nil {
			t.Fatal(err)
		}
		sub := watch(t, s)
		var ids []string
		for range 2 {
			id, perr := s.Start(protocol.AudienceLLM, "ui.show", textInput)
			if perr != nil {
				t.Fatal(perr)
			}
			waitFor(t, sub, func(m *protocol.CapabilityInvoked) bool { return m.CallID == id })
			ids = append(ids, id)
		}
		seq := s.LastSeq()
		out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", textInput)
		wantCode(t, out, protocol.CodeQuotaExceeded)
		if !strings.Contains(out.Err.Message, "MaxPendingCalls") {
			t.Errorf("message %q does not name the quota", out.Err.Message)
		}
		if _, perr := s.Start(protocol.AudienceLLM, "ui.show", textInput); perr == nil || perr.Code != protocol.CodeQuotaExceeded {
			t.Errorf("Start over the quota: %v", perr)
		}
		if s.LastSeq() != seq {
			t.Fatal("a refused call emitted events")
		}
		if err := s.Result(session.Client, &protocol.CapabilityResult{CallID: ids[0], Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		wantValue(t, s.Invoke(context.Background(), protocol.AudienceLLM, "echo", textInput), string(textInput))
		_ = s.Cancel(ids[1], "")
	})
	t.Run("defaults", func(t *testing.T) {
		s := session.New("q", nil)
		caps := make([]protocol.Capability, 1025)
		for i := range caps {
			caps[i] = clientCap(fmt.Sprintf("c.%04d", i))
		}
		wantErrCode(t, s.Register(session.Client, caps...), protocol.CodeQuotaExceeded)
		if err := s.Register(session.Client, caps[:1024]...); err != nil {
			t.Fatalf("1024 capabilities: %v", err)
		}
	})
}

// TestUnchangedRegistration (issue 15): re-registering an identical
// capability emits nothing, also after a restart for an agent-side one
// registered again by reattach.
func TestUnchangedRegistration(t *testing.T) {
	j := &memJournal{}
	s := session.New("same", &session.Options{Journal: j})
	if err := s.Register(session.Client, clientCap("ui.show"), clientCap("ui.hide")); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterAgent(agentCap("fs.read"), echo); err != nil {
		t.Fatal(err)
	}
	seq := s.LastSeq()
	if err := s.Register(session.Client, clientCap("ui.show")); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterAgent(agentCap("fs.read"), returns(`"new handler"`, nil)); err != nil {
		t.Fatal(err)
	}
	if s.LastSeq() != seq {
		t.Fatalf("unchanged re-registrations emitted %d events", s.LastSeq()-seq)
	}
	// The agent side took the new handler.
	wantValue(t, s.Invoke(context.Background(), protocol.AudienceLLM, "fs.read", textInput), `"new handler"`)
	// A batch with one change carries only the change.
	changed := clientCap("ui.hide")
	changed.Description = "Hide it."
	seq = s.LastSeq()
	if err := s.Register(session.Client, clientCap("ui.show"), changed); err != nil {
		t.Fatal(err)
	}
	evs := eventsAfter(t, s, seq)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	if reg := evs[0].Msg.(*protocol.CapabilityRegister); len(reg.Capabilities) != 1 || reg.Capabilities[0].Name != "ui.hide" {
		t.Fatalf("register event %s", jsonOf(t, reg))
	}
	// After a restart, the environment re-attaching the same tool.
	events := j.events(t)
	r, err := session.Restore("same", events, nil, func(r *session.Session) error { return r.RegisterAgent(agentCap("fs.read"), echo) })
	if err != nil {
		t.Fatal(err)
	}
	if r.LastSeq() != events[len(events)-1].Seq {
		t.Errorf("reattaching an unchanged tool emitted %d events", r.LastSeq()-events[len(events)-1].Seq)
	}
	if _, ok := r.Lookup("fs.read"); !ok {
		t.Fatal("fs.read is not registered after the reattach")
	}
	// A changed tool is announced.
	changedTool := agentCap("fs.read")
	changedTool.Description = "Read, v2."
	if err := r.RegisterAgent(changedTool, echo); err != nil {
		t.Fatal(err)
	}
	if r.LastSeq() != events[len(events)-1].Seq+1 {
		t.Error("a changed tool was registered silently")
	}
}

// TestCallLoggedAtInfo (issue 15): every finished call is logged at info
// with its capability, invoker, outcome code and duration.
func TestCallLoggedAtInfo(t *testing.T) {
	s, rec := recordingSession(session.Options{})
	if err := s.RegisterAgent(agentCap("echo"), echo); err != nil {
		t.Fatal(err)
	}
	s.Invoke(context.Background(), protocol.AudienceLLM, "echo", textInput)
	s.Invoke(context.Background(), protocol.AudienceUser, "echo", json.RawMessage(`{"text":1}`)) // refused: not a call
	if err := s.Register(session.Client, clientCap("ui.show")); err != nil {
		t.Fatal(err)
	}
	id, perr := s.Start(protocol.AudienceLLM, "ui.show", textInput)
	if perr != nil {
		t.Fatal(perr)
	}
	if err := s.Cancel(id, "test"); err != nil {
		t.Fatal(err)
	}
	attrs := rec.wait(t, "call finished", map[string]string{"capability": "capability:agent:echo", "invoker": "llm", "code": "ok"})
	if _, err := time.ParseDuration(attrs["duration"]); err != nil || attrs["call"] == "" {
		t.Errorf("call finished record %v", attrs)
	}
	rec.wait(t, "call finished", map[string]string{"capability": "capability:client:ui.show", "call": id, "invoker": "llm", "code": "cancelled"})
}

// TestRestoreDeregistersWhatIsNotAttachedAgain (issue 23): the runtime
// registrations a journal holds come back only if reattach — or, within
// PeerGrace, an environment reconnecting — registers them again; those
// that do not are ended by one capability_deregister, so the log read
// from its start says what the registry holds. Those registered again
// unchanged emit nothing.
func TestRestoreDeregistersWhatIsNotAttachedAgain(t *testing.T) {
	j := &memJournal{}
	s := session.New("diff", &session.Options{Journal: j})
	for _, name := range []string{"fs.read", "fs.gone", "env.late"} {
		if err := s.RegisterAgent(agentCap(name), echo); err != nil {
			t.Fatal(err)
		}
	}
	events := j.events(t)
	last := events[len(events)-1].Seq
	reattach := func(r *session.Session) error { return r.RegisterAgent(agentCap("fs.read"), echo) }

	t.Run("after the grace, what was not registered again is deregistered", func(t *testing.T) {
		j2 := &memJournal{}
		// Subscribed before the grace can pass: Restore returns the
		// session first, and 50 ms is the grace, not a bound of the test.
		r, err := session.Restore("diff", events, &session.Options{Journal: j2, PeerGrace: 50 * time.Millisecond}, reattach)
		if err != nil {
			t.Fatal(err)
		}
		sub := r.Subscribe(last)
		t.Cleanup(sub.Close)
		d, seq := waitFor[*protocol.CapabilityDeregister](t, sub, nil)
		if !slices.Equal(d.Names, []string{"env.late", "fs.gone"}) || seq != last+1 {
			t.Fatalf("deregistered %v at seq %d, want [env.late fs.gone] at %d", d.Names, seq, last+1)
		}
		if _, ok := r.Lookup("fs.read"); !ok {
			t.Fatal("fs.read, registered again, is gone")
		}
		for _, e := range j2.events(t) {
			if _, ok := e.Msg.(*protocol.CapabilityRegister); ok {
				t.Fatalf("the unchanged fs.read was registered again in the journal: %s", jsonOf(t, e.Msg))
			}
		}
		if n := len(j2.events(t)); n != 1 {
			t.Fatalf("the restore journaled %d events, want the one deregister", n)
		}
	})

	t.Run("registered again within the grace, nothing is emitted", func(t *testing.T) {
		r, err := session.Restore("diff", events, &session.Options{PeerGrace: time.Hour}, reattach)
		if err != nil {
			t.Fatal(err)
		}
		// The environment over a connection, back: its tool unchanged.
		if err := r.RegisterAgent(agentCap("env.late"), echo); err != nil {
			t.Fatal(err)
		}
		if r.LastSeq() != last {
			t.Fatalf("the restore and the environment's return emitted %d events", r.LastSeq()-last)
		}
	})

	t.Run("without a grace, at once", func(t *testing.T) {
		r, err := session.Restore("diff", events, &session.Options{PeerGrace: -1}, reattach)
		if err != nil {
			t.Fatal(err)
		}
		if r.LastSeq() != last+1 {
			t.Fatalf("%d events after the restore, want the deregister", r.LastSeq()-last)
		}
		if _, ok := r.Lookup("env.late"); ok {
			t.Fatal("env.late is registered")
		}
	})
}
