package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// The bounded waits of internal/testutil, under this package's names.
const waitLimit = testutil.WaitLimit

func waitCtx(t testing.TB) context.Context { t.Helper(); return testutil.Context(t) }

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return testutil.Recv(t, ch, what)
}

// textSchema is the input schema of most test capabilities.
const textSchema = `{"type":"object","properties":{"text":{"type":"string","maxLength":20}},"required":["text"],"additionalProperties":false}`

var textInput = json.RawMessage(`{"text":"hi"}`)

func newCap(name string, side protocol.Side, origin protocol.Origin) protocol.Capability {
	return protocol.Capability{
		Name:        name,
		Description: "Test capability " + name + ".",
		InputSchema: json.RawMessage(textSchema),
		Side:        side,
		Origin:      origin,
	}
}

func clientCap(name string) protocol.Capability {
	return newCap(name, protocol.SideClient, protocol.Origin{Kind: protocol.OriginClient})
}

func appCap(appID, name string) protocol.Capability {
	return newCap(name, protocol.SideApp, protocol.Origin{Kind: protocol.OriginApp, ID: appID})
}

func agentCap(name string) protocol.Capability {
	return newCap(name, protocol.SideAgent, protocol.Origin{Kind: protocol.OriginAgent})
}

func ms(n int64) *int64 { return &n }

// echo is an agent-side handler that returns its input.
var echo = session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
	return c.Input, nil
})

// returns is a handler that returns v and err.
func returns(v string, err error) session.Handler {
	return session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		if v == "" {
			return nil, err
		}
		return json.RawMessage(v), err
	})
}

// gate is an agent-side handler that reports each call on started, then
// blocks until it is released or, unless it ignores its context, until the
// call's context is done. It reports ctx.Err() as it stops waiting on
// stopped, and signals returned just before it returns.
type gate struct {
	ignoreCtx bool
	started   chan session.Call
	release   chan struct{}
	stopped   chan error
}

func newGate(ignoreCtx bool) *gate {
	return &gate{ignoreCtx: ignoreCtx, started: make(chan session.Call, 64),
		release: make(chan struct{}), stopped: make(chan error, 64)}
}

func (g *gate) Handle(ctx context.Context, c *session.Call) (json.RawMessage, error) {
	g.started <- *c
	if g.ignoreCtx {
		<-g.release
		g.stopped <- ctx.Err()
		return json.RawMessage(`"late"`), nil
	}
	select {
	case <-ctx.Done():
		g.stopped <- ctx.Err()
		return nil, ctx.Err()
	case <-g.release:
		g.stopped <- ctx.Err()
		return json.RawMessage(`"released"`), nil
	}
}

// watch subscribes to s from its newest event; the subscription ends with
// the test.
func watch(t testing.TB, s *session.Session) *session.Subscription {
	sub := s.Subscribe(s.LastSeq())
	t.Cleanup(sub.Close)
	return sub
}

// waitFor reads sub until a message of type M for which match is true
// (nil matches any), and returns it with its seq.
func waitFor[M protocol.Message](t testing.TB, sub *session.Subscription, match func(M) bool) (M, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			var zero M
			t.Fatalf("waiting for a %T event: %v", zero, err)
		}
		if m, ok := ev.Msg.(M); ok && (match == nil || match(m)) {
			return m, ev.Seq
		}
	}
}

// eventsAfter returns the events of s after seq `after` up to its newest
// event as Subscribe replays them, failing on a snapshot.
func eventsAfter(t testing.TB, s *session.Session, after uint64) []session.Event {
	t.Helper()
	last := s.LastSeq()
	sub := s.Subscribe(after)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var out []session.Event
	for seq := after; seq < last; {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("replaying events %d..%d: %v", after+1, last, err)
		}
		if _, ok := ev.Msg.(*protocol.Snapshot); ok {
			t.Fatalf("replaying events %d..%d: got a snapshot at %d", after+1, last, ev.Seq)
		}
		out = append(out, ev)
		seq = ev.Seq
	}
	return out
}

// allEvents returns every event in s's log.
func allEvents(t testing.TB, s *session.Session) []session.Event {
	t.Helper()
	return eventsAfter(t, s, 0)
}

// only returns the messages of type M among evs.
func only[M protocol.Message](evs []session.Event) []M {
	var out []M
	for _, ev := range evs {
		if m, ok := ev.Msg.(M); ok {
			out = append(out, m)
		}
	}
	return out
}

// trail lists the types of the events of call id, in log order.
func trail(evs []session.Event, id string) []protocol.Type {
	var out []protocol.Type
	for _, ev := range evs {
		if protocol.CallIDOf(ev.Msg) == id {
			out = append(out, ev.Msg.MessageType())
		}
	}
	return out
}

// theOutcome checks that s's log holds exactly one capability_outcome event
// (the session served exactly one call) and that it matches out; it returns
// the event.
func theOutcome(t testing.TB, s *session.Session, out protocol.Outcome) *protocol.CapabilityOutcome {
	t.Helper()
	outs := only[*protocol.CapabilityOutcome](allEvents(t, s))
	if len(outs) != 1 {
		t.Fatalf("got %d capability_outcome events, want exactly 1: %s", len(outs), jsonOf(t, outs))
	}
	if got, want := jsonOf(t, outs[0].Outcome), jsonOf(t, out); got != want {
		t.Errorf("capability_outcome event carries %s, the caller got %s", got, want)
	}
	return outs[0]
}

// wantCode fails unless out is an error outcome with code.
func wantCode(t testing.TB, out protocol.Outcome, code protocol.Code) {
	t.Helper()
	if out.IsOK() {
		t.Fatalf("outcome is the value %s, want error code %s", out.Value, code)
	}
	if out.Err.Code != code {
		t.Fatalf("outcome code %s (%q), want %s", out.Err.Code, out.Err.Message, code)
	}
}

// wantValue fails unless out is the value want (compared as JSON).
func wantValue(t testing.TB, out protocol.Outcome, want string) {
	t.Helper()
	if !out.IsOK() {
		t.Fatalf("outcome is error %s: %s, want value %s", out.Err.Code, out.Err.Message, want)
	}
	if !jsonEqual(out.Value, []byte(want)) {
		t.Fatalf("outcome value %s, want %s", out.Value, want)
	}
}

// wantErrCode fails unless err carries code (see protocol.Coder).
func wantErrCode(t testing.TB, err error, code protocol.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %s", code)
	}
	var c protocol.Coder
	if !errors.As(err, &c) {
		t.Fatalf("error %q (%T) carries no code, want %s", err, err, code)
	}
	if c.ErrorCode() != code {
		t.Fatalf("error %q has code %s, want %s", err, c.ErrorCode(), code)
	}
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x) // maps marshal sorted by key
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// state is what a rejected command must leave alone: every registration,
// every pending call and the newest seq.
func state(t testing.TB, s *session.Session) string {
	t.Helper()
	return jsonOf(t, s.Snapshot())
}

// names returns the names of caps.
func names(caps []protocol.Capability) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = c.Name
	}
	return out
}

// dispatched starts a call to a peer-side capability and waits until it
// is dispatched: its id, and the channel its outcome comes on.
func dispatched(t testing.TB, s *session.Session, name string) (string, chan protocol.Outcome) {
	t.Helper()
	sub := watch(t, s)
	done := make(chan protocol.Outcome, 1)
	go func() { done <- s.Invoke(waitCtx(t), protocol.AudienceLLM, name, textInput) }()
	inv, _ := waitFor[*protocol.CapabilityInvoked](t, sub, nil)
	return inv.CallID, done
}

// answer runs a peer that answers every capability_invoked of name with
// reply(invocation), as p, until the test ends. A Result error fails the
// test.
func answer(t testing.TB, s *session.Session, p session.Peer, name string, reply func(*protocol.CapabilityInvoked) json.RawMessage) {
	sub := s.Subscribe(s.LastSeq())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := sub.Next(context.Background())
			if err != nil {
				return
			}
			inv, ok := ev.Msg.(*protocol.CapabilityInvoked)
			if !ok || inv.Name != name {
				continue
			}
			if err := s.Result(p, &protocol.CapabilityResult{CallID: inv.CallID, Result: reply(inv)}); err != nil {
				t.Errorf("answer %s: %v", inv.CallID, err)
			}
		}
	}()
	t.Cleanup(func() {
		sub.Close()
		<-done
	})
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	recs    []slog.Record
	changed chan struct{} // closed on the next record; nil when nobody waits
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	return nil
}

// wait waits for a record that find would return.
func (h *logRecorder) wait(t testing.TB, msg string, want map[string]string) map[string]string {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		h.mu.Lock()
		if h.changed == nil {
			h.changed = make(chan struct{})
		}
		changed := h.changed
		h.mu.Unlock()
		if attrs, ok := h.find(msg, want); ok {
			return attrs
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("no log record %q with %v; logs:\n%s", msg, want, h)
		}
	}
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of the first record whose message is msg and
// whose attributes include every key=value of want.
func (h *logRecorder) find(msg string, want map[string]string) (map[string]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		ok := true
		for k, v := range want {
			if attrs[k] != v {
				ok = false
			}
		}
		if ok {
			return attrs, true
		}
	}
	return nil, false
}

func (h *logRecorder) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, r := range h.recs {
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
			return true
		})
		b.WriteByte('\n')
	}
	return b.String()
}

// recordingSession returns a session whose logs go to a recorder.
func recordingSession(opts session.Options) (*session.Session, *logRecorder) {
	rec := &logRecorder{}
	opts.Logger = slog.New(rec)
	return session.New("test", &opts), rec
}

// inBubble runs f in a testing/synctest bubble, where time is fake: a
// 60-second timeout passes at once, and synctest.Wait waits until every
// goroutine of the bubble is blocked.
func inBubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		// Registered first, so it runs last: the fake clock moves past the
		// idle lifetime of the session's handler goroutines (10 s), so that
		// they have exited when the bubble ends. No real time passes.
		t.Cleanup(func() { time.Sleep(time.Minute) })
		f(t)
	})
}

// digestOf returns the inputDigest of s's pending call id, as a snapshot
// shows it to an approver ("" when the call is not awaiting approval).
func digestOf(s *session.Session, id string) string {
	for _, pc := range s.Snapshot().PendingCalls {
		if pc.CallID == id {
			return pc.InputDigest
		}
	}
	return ""
}

// approveOf approves s's pending call id, echoing its digest.
func approveOf(s *session.Session, id, by string) *protocol.CapabilityApprove {
	return &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionApproved, DecidedBy: by, InputDigest: digestOf(s, id)}
}
