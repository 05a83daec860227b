package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// busySession runs a little of everything and returns the session with its
// full event list (seq 1 to LastSeq).
func busySession(t *testing.T, opts *session.Options) *session.Session {
	t.Helper()
	s := session.New("test", opts)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Register(session.Client, clientCap("c.one"), clientCap("c.two")))
	must(s.RegisterAgent(agentCap("a.echo"), echo))
	wantValue(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "a.echo", textInput), string(textInput))
	turn := clientCap("c.turn")
	turn.Scope = protocol.ScopeTurn
	must(s.Register(session.Client, turn))
	s.EndTurn(protocol.TurnCompleted, "")
	must(s.Deregister(session.Client, "c.two"))
	wantCode(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "a.echo", json.RawMessage(`{}`)), protocol.CodeInvalidInput) // no event
	return s
}

// busyTypes is what busySession emits, in order.
var busyTypes = []protocol.Type{
	protocol.TypeCapabilityRegister, protocol.TypeCapabilityRegister,
	protocol.TypeCapabilityInvoked, protocol.TypeCapabilityOutcome,
	protocol.TypeCapabilityRegister, protocol.TypeCapabilityDeregister, protocol.TypeTurnEnded, protocol.TypeCapabilityDeregister,
}

func types(evs []session.Event) []protocol.Type {
	out := make([]protocol.Type, len(evs))
	for i, ev := range evs {
		out[i] = ev.Msg.MessageType()
	}
	return out
}

// TestSeq: seq starts at 1 and grows by one per event.
func TestSeq(t *testing.T) {
	s := session.New("test", nil)
	if s.LastSeq() != 0 {
		t.Fatalf("a new session's LastSeq = %d", s.LastSeq())
	}
	s = busySession(t, nil)
	evs := allEvents(t, s)
	if !slices.Equal(types(evs), busyTypes) {
		t.Fatalf("events %v, want %v", types(evs), busyTypes)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
	}
	if s.LastSeq() != uint64(len(evs)) {
		t.Fatalf("LastSeq = %d after %d events", s.LastSeq(), len(evs))
	}
}

// TestSubscribeReplays: a subscriber resuming from any seq still in the log
// gets exactly the events it missed, in order, then the live stream.
func TestSubscribeReplays(t *testing.T) {
	s := busySession(t, nil)
	all := allEvents(t, s)
	last := s.LastSeq()
	for after := uint64(0); after <= last; after++ {
		t.Run(fmt.Sprintf("after %d", after), func(t *testing.T) {
			sub := s.Subscribe(after)
			defer sub.Close()
			ctx := waitCtx(t)
			for _, want := range all[after:] {
				got, err := sub.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got.Seq != want.Seq || jsonOf(t, got.Msg) != jsonOf(t, want.Msg) {
					t.Fatalf("replayed seq %d %s, want seq %d %s", got.Seq, jsonOf(t, got.Msg), want.Seq, jsonOf(t, want.Msg))
				}
			}
			// Nothing more until the next event, which is live.
			short, cancel := context.WithCancel(ctx)
			cancel()
			if ev, err := sub.Next(short); !errors.Is(err, context.Canceled) {
				t.Fatalf("Next after the replay = %v, %v; want to wait", ev, err)
			}
		})
	}
	t.Run("live", func(t *testing.T) {
		sub := s.Subscribe(last)
		defer sub.Close()
		got := make(chan session.Event, 1)
		go func() {
			ev, err := sub.Next(waitCtx(t))
			if err != nil {
				t.Error(err)
			}
			got <- ev
		}()
		if err := s.Register(session.Client, clientCap("c.live")); err != nil {
			t.Fatal(err)
		}
		ev := recv(t, got, "the live event")
		reg, ok := ev.Msg.(*protocol.CapabilityRegister)
		if ev.Seq != last+1 || !ok || reg.Capabilities[0].Name != "c.live" {
			t.Fatalf("live event seq %d %s", ev.Seq, jsonOf(t, ev.Msg))
		}
	})
}

// TestSubscribeSnapshot: a subscriber further behind than Options.LogSize,
// or ahead of the session, gets a snapshot of the current state first, then
// live events.
func TestSubscribeSnapshot(t *testing.T) {
	const logSize = 4
	s := session.New("test", &session.Options{LogSize: logSize})
	watcher := watch(t, s)
	approval := agentCap("fs.delete")
	approval.RequiresApproval = true
	if err := s.RegisterAgent(approval, echo); err != nil {
		t.Fatal(err)
	}
	react := clientCap("platform.react")
	react.Audience = []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}
	if err := s.Register(session.Client, react); err != nil {
		t.Fatal(err)
	}
	awaiting, perr := s.Start(protocol.AudienceLLM, "fs.delete", textInput)
	if perr != nil {
		t.Fatal(perr)
	}
	req, _ := waitFor(t, watcher, func(m *protocol.ApprovalRequested) bool { return m.CallID == awaiting })
	if !strings.HasPrefix(req.InputDigest, "sha256:") || !strings.HasPrefix(req.Revision, "sha256:") {
		t.Fatalf("approval request without its digest and revision: %s", jsonOf(t, req))
	}
	running, perr := s.Start(protocol.AudienceUser, "platform.react", json.RawMessage(`{"text":"run"}`))
	if perr != nil {
		t.Fatal(perr)
	}
	waitFor(t, watcher, func(m *protocol.CapabilityInvoked) bool { return m.CallID == running })
	for i := range logSize { // push the calls' events out of the log
		if err := s.Register(session.Client, clientCap(fmt.Sprintf("filler.%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	last := s.LastSeq()
	oldest := last - logSize + 1 // the oldest event the log still holds

	wantSnapshot := func(t *testing.T, ev session.Event) *protocol.Snapshot {
		t.Helper()
		snap, ok := ev.Msg.(*protocol.Snapshot)
		if !ok {
			t.Fatalf("first event is %s, want a snapshot", jsonOf(t, ev.Msg))
		}
		if ev.Seq != last || snap.Seq != last {
			t.Errorf("snapshot at seq %d (event seq %d), want %d", snap.Seq, ev.Seq, last)
		}
		wantNames := []string{session.CapabilitiesListName, "filler.0", "filler.1", "filler.2", "filler.3", "fs.delete", "platform.react"}
		if got := names(snap.Capabilities); !slices.Equal(got, wantNames) {
			t.Errorf("snapshot capabilities %q, want %q", got, wantNames)
		}
		want := []protocol.PendingCall{
			{CallID: awaiting, Name: "fs.delete", Input: textInput, Invoker: protocol.AudienceLLM, State: protocol.CallAwaitingApproval,
				InputDigest: req.InputDigest, Revision: req.Revision},
			{CallID: running, Name: "platform.react", Input: json.RawMessage(`{"text":"run"}`), Invoker: protocol.AudienceUser, State: protocol.CallRunning},
		}
		slices.SortFunc(want, func(a, b protocol.PendingCall) int {
			if a.CallID < b.CallID {
				return -1
			}
			return 1
		})
		if got, w := jsonOf(t, snap.PendingCalls), jsonOf(t, want); got != w {
			t.Errorf("snapshot pending calls\n%s\nwant\n%s", got, w)
		}
		if got, w := jsonOf(t, snap), jsonOf(t, s.Snapshot()); got != w {
			t.Errorf("the snapshot event differs from Session.Snapshot():\n%s\n%s", got, w)
		}
		return snap
	}

	tests := []struct {
		name     string
		after    uint64
		snapshot bool
	}{
		{"from the start", 0, true},
		{"just too far behind", oldest - 2, true},
		{"oldest still kept", oldest - 1, false},
		{"up to date", last, false},
		{"one ahead", last + 1, true},
		{"far ahead", last + 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := s.Subscribe(tt.after)
			defer sub.Close()
			ctx := waitCtx(t)
			if tt.snapshot {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				wantSnapshot(t, ev)
			} else {
				for seq := tt.after + 1; seq <= last; seq++ {
					ev, err := sub.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if ev.Seq != seq {
						t.Fatalf("replayed seq %d (%T), want %d", ev.Seq, ev.Msg, seq)
					}
				}
			}
			short, cancel := context.WithCancel(ctx)
			cancel()
			if ev, err := sub.Next(short); !errors.Is(err, context.Canceled) {
				t.Fatalf("after the snapshot or replay Next = %s, %v; want to wait for live events", jsonOf(t, ev.Msg), err)
			}
		})
	}

	t.Run("then live", func(t *testing.T) {
		sub := s.Subscribe(0)
		defer sub.Close()
		ctx := waitCtx(t)
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantSnapshot(t, ev)
		if err := s.Approve(session.Client, approveOf(s, awaiting, "ada")); err != nil {
			t.Fatal(err)
		}
		ev, err = sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := ev.Msg.(*protocol.ApprovalDecided); ev.Seq != last+1 || !ok || d.CallID != awaiting {
			t.Fatalf("after the snapshot: seq %d %s, want approval_decided of %s at %d", ev.Seq, jsonOf(t, ev.Msg), awaiting, last+1)
		}
		ev, err = sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inv, ok := ev.Msg.(*protocol.CapabilityInvoked)
		if ev.Seq != last+2 || !ok || inv.CallID != awaiting {
			t.Fatalf("after the snapshot: seq %d %s, want capability_invoked of %s at %d", ev.Seq, jsonOf(t, ev.Msg), awaiting, last+2)
		}
		if err := s.Cancel(running, ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == running })
	})

	t.Run("empty session, ahead", func(t *testing.T) {
		s := session.New("test", nil)
		sub := s.Subscribe(7)
		defer sub.Close()
		ev, err := sub.Next(waitCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		snap, ok := ev.Msg.(*protocol.Snapshot)
		if !ok || snap.Seq != 0 || ev.Seq != 0 || len(snap.PendingCalls) != 0 || !slices.Equal(names(snap.Capabilities), []string{session.CapabilitiesListName}) {
			t.Fatalf("got %s", jsonOf(t, ev))
		}
		if err := s.Register(session.Client, clientCap("c.one")); err != nil {
			t.Fatal(err)
		}
		if ev, err := sub.Next(waitCtx(t)); err != nil || ev.Seq != 1 {
			t.Fatalf("after the snapshot: %v, %v; want seq 1", ev, err)
		}
	})
}

// TestSlowSubscriber: a subscriber that does not read never holds the
// session back; it falls back to a snapshot.
func TestSlowSubscriber(t *testing.T) {
	s := session.New("test", &session.Options{LogSize: 8})
	if err := s.RegisterAgent(agentCap("a.echo"), echo); err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(0)
	defer sub.Close()
	for range 100 {
		wantValue(t, s.Invoke(waitCtx(t), protocol.AudienceLLM, "a.echo", textInput), string(textInput))
	}
	ev, err := sub.Next(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ev.Msg.(*protocol.Snapshot); !ok || ev.Seq != s.LastSeq() {
		t.Fatalf("a subscriber 201 events behind a log of 8 got seq %d %T, want a snapshot at %d", ev.Seq, ev.Msg, s.LastSeq())
	}
}

// TestNext: Next honours its context and Close.
func TestNext(t *testing.T) {
	tests := []struct {
		name string
		// next calls Next on a subscription with nothing to read, ending it
		// some way; it returns what Next returned and the error wanted.
		next func(t *testing.T, sub *session.Subscription) (error, error)
	}{
		{"cancelled context", func(t *testing.T, sub *session.Subscription) (error, error) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := sub.Next(ctx)
			return err, context.Canceled
		}},
		{"cancelled while waiting", func(t *testing.T, sub *session.Subscription) (error, error) {
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := sub.Next(ctx)
				errc <- err
			}()
			cancel()
			return recv(t, errc, "Next to return"), context.Canceled
		}},
		{"deadline", func(t *testing.T, sub *session.Subscription) (error, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_, err := sub.Next(ctx)
			return err, context.DeadlineExceeded
		}},
		{"closed before", func(t *testing.T, sub *session.Subscription) (error, error) {
			sub.Close()
			_, err := sub.Next(waitCtx(t))
			return err, session.ErrSubscriptionClosed
		}},
		{"closed while waiting", func(t *testing.T, sub *session.Subscription) (error, error) {
			errc := make(chan error, 1)
			go func() {
				_, err := sub.Next(waitCtx(t))
				errc <- err
			}()
			sub.Close()
			return recv(t, errc, "Next to return"), session.ErrSubscriptionClosed
		}},
		{"closed twice", func(t *testing.T, sub *session.Subscription) (error, error) {
			sub.Close()
			sub.Close()
			_, err := sub.Next(waitCtx(t))
			return err, session.ErrSubscriptionClosed
		}},
		{"closed concurrently", func(t *testing.T, sub *session.Subscription) (error, error) {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(sub.Close)
			}
			wg.Wait()
			_, err := sub.Next(waitCtx(t))
			return err, session.ErrSubscriptionClosed
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			sub := s.Subscribe(s.LastSeq())
			defer sub.Close()
			got, want := tt.next(t, sub)
			if !errors.Is(got, want) {
				t.Fatalf("Next returned %v, want %v", got, want)
			}
		})
	}
	t.Run("closed with events pending", func(t *testing.T) {
		s := busySession(t, nil)
		sub := s.Subscribe(0)
		sub.Close()
		if _, err := sub.Next(waitCtx(t)); !errors.Is(err, session.ErrSubscriptionClosed) {
			t.Fatalf("Next after Close = %v, want ErrSubscriptionClosed", err)
		}
	})
	t.Run("concurrent Close races", func(t *testing.T) {
		for range 200 {
			sub := session.New("test", nil).Subscribe(0)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					<-start
					sub.Close()
				})
			}
			close(start)
			wg.Wait()
		}
	})
}

// TestSubscribersAreIndependent: each subscription reads the whole stream
// at its own pace.
func TestSubscribersAreIndependent(t *testing.T) {
	s := busySession(t, nil)
	want := jsonOf(t, allEvents(t, s))
	a, b := s.Subscribe(0), s.Subscribe(0)
	defer a.Close()
	defer b.Close()
	read := func(sub *session.Subscription) string {
		var evs []session.Event
		for range busyTypes {
			ev, err := sub.Next(waitCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return jsonOf(t, evs)
	}
	if got := read(a); got != want {
		t.Errorf("first subscriber read %s", got)
	}
	if got := read(b); got != want {
		t.Errorf("second subscriber read %s", got)
	}
}
