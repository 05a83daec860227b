package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// openInternal opens an embedded store for the tests that need its
// connection.
func openInternal(t *testing.T) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, &Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestReplySlot: an append's wait takes the reply to its own attempt
// only — a late reply to an attempt that timed out is dropped, never
// taken for the next one's — and reports no responders, a timeout and a
// closed connection as the errors the publish retries on or gives up
// with.
func TestReplySlot(t *testing.T) {
	s := openInternal(t)
	// The responder holds its first request until released, then answers
	// it (late) and every later one at once, each with its own reply
	// subject's attempt in the body.
	release := make(chan struct{})
	first := true
	sub, err := s.nc.Subscribe("test.echo", func(m *nats.Msg) {
		if first {
			first = false
			<-release
		}
		_ = m.Respond([]byte(m.Reply))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sl, err := s.replies.take(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.replies.give(sl)

	if _, err := sl.request(s.nc, s.connClosed, &nats.Msg{Subject: "test.echo"}, 50*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("unanswered attempt: %v, want a timeout", err)
	}
	close(release) // the first attempt's reply arrives now, late
	m := &nats.Msg{Subject: "test.echo"}
	resp, err := sl.request(s.nc, s.connClosed, m, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := sl.prefix + "2"; string(resp.Data) != want || resp.Subject != want {
		t.Fatalf("second attempt got the reply %q on %q, want its own, %q", resp.Data, resp.Subject, want)
	}
	if m.Reply != "" {
		t.Fatalf("the message keeps the reply subject %q", m.Reply)
	}

	if _, err := sl.request(s.nc, s.connClosed, &nats.Msg{Subject: "test.nobody"}, 10*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no stream on the subject: %v, want no responders", err)
	}

	closed := make(chan struct{})
	close(closed)
	if _, err := sl.request(s.nc, closed, &nats.Msg{Subject: "test.never"}, 10*time.Second); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("closed connection: %v, want connection closed", err)
	}
}

// TestReplySlotsReused: sequential appends share one slot, concurrent
// ones take one each, and no more than maxIdleSlots stay subscribed.
func TestReplySlotsReused(t *testing.T) {
	s := openInternal(t)
	a, err := s.replies.take(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	s.replies.give(a)
	b, err := s.replies.take(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("a slot given back was not reused")
	}
	c, err := s.replies.take(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	if c == b || c.prefix == b.prefix {
		t.Fatal("two slots in use at once share a reply subject")
	}
	s.replies.give(b)
	s.replies.give(c)

	held := make([]*replySlot, maxIdleSlots+3)
	for i := range held {
		if held[i], err = s.replies.take(s.nc); err != nil {
			t.Fatal(err)
		}
	}
	for _, sl := range held {
		s.replies.give(sl)
	}
	if n := len(s.replies.idle); n != maxIdleSlots {
		t.Fatalf("%d idle slots kept, want %d", n, maxIdleSlots)
	}
	if subs := s.nc.NumSubscriptions(); subs > maxIdleSlots+8 {
		t.Fatalf("%d subscriptions after the slots beyond %d were given back", subs, maxIdleSlots)
	}
}

// TestReplySubjectsReused: a slot given back with every attempt answered
// replies to the same subject again, and one with an attempt unanswered
// goes on numbering, so that the late reply is not taken for the next
// request's.
func TestReplySubjectsReused(t *testing.T) {
	s := openInternal(t)
	release := make(chan struct{})
	sub, err := s.nc.Subscribe("test.echo", func(m *nats.Msg) {
		if string(m.Data) == "hold" {
			<-release
		}
		_ = m.Respond([]byte(m.Reply))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ask := func(sl *replySlot, data string, timeout time.Duration) (string, error) {
		resp, err := sl.request(s.nc, s.connClosed, &nats.Msg{Subject: "test.echo", Data: []byte(data)}, timeout)
		if err != nil {
			return "", err
		}
		return string(resp.Data), nil
	}
	sl, err := s.replies.take(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, err := ask(sl, "", 10*time.Second); err != nil || got != sl.prefix+"1" {
			t.Fatalf("reply %q (%v), want %q", got, err, sl.prefix+"1")
		}
		s.replies.give(sl)
		if again, err := s.replies.take(s.nc); err != nil || again != sl {
			t.Fatalf("slot not reused: %v", err)
		}
	}
	if _, err := ask(sl, "hold", 50*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("held attempt: %v, want a timeout", err)
	}
	s.replies.give(sl)
	if again, err := s.replies.take(s.nc); err != nil || again != sl {
		t.Fatalf("slot not reused: %v", err)
	}
	close(release) // the held attempt's reply, to subject 1, arrives late
	if got, err := ask(sl, "", 10*time.Second); err != nil || got != sl.prefix+"2" {
		t.Fatalf("the request after a late one got %q (%v), want its own reply, %q", got, err, sl.prefix+"2")
	}
	s.replies.give(sl)
}

// TestEmbeddedAppendsCarryNoMessageID: on the embedded server an append
// carries the expected last subject sequence and the journal's token, and
// no message id (the store's msgIDs: the sequence refuses a repeat).
func TestEmbeddedAppendsCarryNoMessageID(t *testing.T) {
	s := openInternal(t)
	j, err := s.Journal("s")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(testEvent(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := s.stream.GetLastMsgForSubject(ctx, subjectPrefix+"s")
	if err != nil {
		t.Fatal(err)
	}
	if id := m.Header.Get("Nats-Msg-Id"); id != "" {
		t.Errorf("stored with message id %q", id)
	}
	if m.Header.Get(tokenHeader) == "" {
		t.Error("stored without the journal's token")
	}
}

// testEvent is a small event with seq seq.
func testEvent(seq uint64) session.Event {
	return session.Event{Seq: seq, Msg: &protocol.CapabilityDeregister{Names: []string{"x"}}}
}
