package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// fakeConsumer answers Fetch from a script: each call takes the next batch.
type fakeConsumer struct {
	jetstream.Consumer // the methods fetchInto does not call panic
	batches            []fakeBatch
	fetches            int
}

func (c *fakeConsumer) Fetch(int, ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	c.fetches++
	if len(c.batches) == 0 {
		return nil, errors.New("no more batches scripted")
	}
	b := c.batches[0]
	c.batches = c.batches[1:]
	return &b, nil
}

type fakeBatch struct {
	msgs []jetstream.Msg
	err  error
}

func (b *fakeBatch) Messages() <-chan jetstream.Msg {
	ch := make(chan jetstream.Msg, len(b.msgs))
	for _, m := range b.msgs {
		ch <- m
	}
	close(ch)
	return ch
}

func (b *fakeBatch) Error() error { return b.err }

type fakeMsg struct {
	jetstream.Msg
	data []byte
}

func (m fakeMsg) Data() []byte { return m.data }

func (m fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{}, nil
}

func eventMsg(t *testing.T, seq uint64) jetstream.Msg {
	t.Helper()
	b, err := protocol.AppendFrame(nil, &protocol.Frame{V: protocol.Version, Seq: seq, Msg: &protocol.CapabilityDeregister{Names: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	return fakeMsg{data: b}
}

// TestFetchRidesOutNoResponders: a pull request that meets no responders
// before any event came (a consumer whose interest has not reached this
// server of a cluster yet) is sent again; other errors are not, and no
// responders after events came is returned as it is.
func TestFetchRidesOutNoResponders(t *testing.T) {
	ctx := context.Background()
	t.Run("no responders, then the events", func(t *testing.T) {
		c := &fakeConsumer{batches: []fakeBatch{
			{err: nats.ErrNoResponders},
			{err: nats.ErrNoResponders},
			{msgs: []jetstream.Msg{eventMsg(t, 1), eventMsg(t, 2)}},
		}}
		var events []session.Event
		got, err := fetchInto(ctx, c, 2, &events)
		if err != nil || got != 2 || len(events) != 2 || events[1].Seq != 2 {
			t.Fatalf("got %d events %v, err %v; want 2 after two retries", got, events, err)
		}
		if c.fetches != 3 {
			t.Fatalf("%d fetches, want 3", c.fetches)
		}
	})
	t.Run("another error is not retried", func(t *testing.T) {
		c := &fakeConsumer{batches: []fakeBatch{{err: nats.ErrConnectionClosed}}}
		var events []session.Event
		if _, err := fetchInto(ctx, c, 1, &events); !errors.Is(err, nats.ErrConnectionClosed) || c.fetches != 1 {
			t.Fatalf("err %v after %d fetches, want the connection error after 1", err, c.fetches)
		}
	})
	t.Run("no responders after events came is returned", func(t *testing.T) {
		c := &fakeConsumer{batches: []fakeBatch{{msgs: []jetstream.Msg{eventMsg(t, 1)}, err: nats.ErrNoResponders}}}
		var events []session.Event
		if got, err := fetchInto(ctx, c, 2, &events); got != 1 || !errors.Is(err, nats.ErrNoResponders) || c.fetches != 1 {
			t.Fatalf("got %d, err %v after %d fetches; want 1 and no responders after 1", got, err, c.fetches)
		}
	})
	t.Run("no responders until the deadline", func(t *testing.T) {
		var batches []fakeBatch
		for range 1000 {
			batches = append(batches, fakeBatch{err: nats.ErrNoResponders})
		}
		c := &fakeConsumer{batches: batches}
		dctx, cancel := context.WithTimeout(ctx, 5*fetchRetryWait)
		defer cancel()
		var events []session.Event
		_, err := fetchInto(dctx, c, 1, &events)
		if !errors.Is(err, nats.ErrNoResponders) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no responders") {
			t.Fatalf("err %v, want no responders and the deadline", err)
		}
		if c.fetches < 2 || c.fetches > 10 {
			t.Fatalf("%d fetches in %s, want a few", c.fetches, 5*fetchRetryWait)
		}
	})
}
