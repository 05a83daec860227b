package store

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishRaw stores data as the session's next message, bypassing the
// journal, and returns its stream sequence: tests use it to plant an
// event that does not decode.
func PublishRaw(ctx context.Context, s *Store, sessionID string, data []byte) (uint64, error) {
	subj, err := subjectFor(sessionID)
	if err != nil {
		return 0, err
	}
	ack, err := s.js.Publish(ctx, subj, data)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// SetLoadLimits lowers the batches of the store's loads to batch events
// (direct gets and pulls) and maxBytes bytes (direct gets); 0 keeps a
// limit. Call it before the first load.
func SetLoadLimits(s *Store, batch, maxBytes int) {
	if batch > 0 {
		s.loadBatch, s.pullBatch = batch, batch
	}
	if maxBytes > 0 {
		s.loadMaxBytes = maxBytes
	}
}

// LoadThroughConsumers makes the store's loads read through an ephemeral
// consumer, as a replicated store's do.
func LoadThroughConsumers(s *Store) { s.direct = false }

// LoadsDirect reports whether the store's loads use direct gets.
func LoadsDirect(s *Store) bool { return s.direct }

// BetweenBatches makes f run between the batches of every load.
func BetweenBatches(s *Store, f func()) { s.loadHook = f }

// ErrInjected is the error of a publish failed by FailNextPublish.
var ErrInjected = errors.New("injected publish failure")

// FailNextPublish makes the store's next journal publish fail with
// ErrInjected. With landed, the message is stored first: its
// acknowledgement is what gets lost. Call it from the goroutine that
// appends.
func FailNextPublish(s *Store, landed bool) {
	s.publishHook = func(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
		s.publishHook = nil
		if landed {
			if _, err := s.js.PublishMsg(ctx, m); err != nil {
				return nil, err
			}
		}
		return nil, ErrInjected
	}
}

// ForgetCounts removes the owners bucket's counts, as a bucket made
// before them has none (owned.go), and makes the store ask again.
func ForgetCounts(ctx context.Context, s *Store) error {
	keys, err := s.owners.ListKeys(ctx)
	if err != nil {
		return err
	}
	for k := range keys.Keys() {
		if k == countsKey || len(k) > len(countPrefix) && k[:len(countPrefix)] == countPrefix {
			if err := s.owners.Purge(ctx, k); err != nil {
				return err
			}
		}
	}
	s.countsReady.Store(false)
	return nil
}

// Fill stores one message of data for each of the sessions ids yields,
// published asynchronously (many in flight): the scale test's way of
// making a million stored sessions in seconds rather than a journal's
// round trip each.
func Fill(ctx context.Context, s *Store, n int, id func(i int) string, data []byte) error {
	for i := range n {
		subj, err := subjectFor(id(i))
		if err != nil {
			return err
		}
		for {
			_, err := s.js.PublishAsync(subj, data)
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				if err != nil {
					return err
				}
				break
			}
			// Too many in flight: let them land, then go on.
			select {
			case <-s.js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	select {
	case <-s.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StreamConfig returns the events stream's configuration as the server
// holds it.
func StreamConfig(ctx context.Context, s *Store) (jetstream.StreamConfig, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	return info.Config, nil
}

// SetDuplicates changes the events stream's deduplication window, as a
// store made by an earlier version of brain had it.
func SetDuplicates(ctx context.Context, s *Store, d time.Duration) error {
	cfg, err := StreamConfig(ctx, s)
	if err != nil {
		return err
	}
	cfg.Duplicates = d
	_, err = s.js.UpdateStream(ctx, cfg)
	return err
}

// Lost is an answer of AnswerAttempts: the attempt is stored, and its
// acknowledgement lost.
const Lost = "(lost)"

// AnswerAttempts answers the next len(answers) publish attempts, of any
// publish, in the server's place, in order (the server answers the
// rest): an answer's text as the server's reply, or Lost. It is how a
// test stands in for a stream between leaders. Call it before the
// appends it is for, from the goroutine that appends.
func AnswerAttempts(s *Store, answers ...string) {
	s.answerHook = func(m *nats.Msg) (*nats.Msg, error, bool) {
		if len(answers) == 0 {
			return nil, nil, false
		}
		a := answers[0]
		answers = answers[1:]
		if a == Lost {
			if _, err := s.js.PublishMsg(context.Background(), &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}); err != nil {
				return nil, err, true
			}
			return nil, nats.ErrTimeout, true
		}
		return &nats.Msg{Data: []byte(a)}, nil, true
	}
}

// LastHeader returns the headers of the session's last stored message.
func LastHeader(ctx context.Context, s *Store, sessionID string) (nats.Header, error) {
	subj, err := subjectFor(sessionID)
	if err != nil {
		return nil, err
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return nil, err
	}
	return m.Header, nil
}

// Fences returns the number of sessions the store keeps a fence for.
func Fences(s *Store) int {
	s.fences.mu.Lock()
	defer s.fences.mu.Unlock()
	return len(s.fences.m)
}

// CountsLost returns how many count updates of this store another
// writer won (owned.go).
func CountsLost(s *Store) int64 { return s.countsLost.Load() }

// Checkpoints returns the store's checkpoints bucket (nil if it keeps
// none): tests plant broken checkpoints in it.
func Checkpoints(s *Store) jetstream.KeyValue { return s.checkpoints }

// CheckpointStream returns the stream of the store's checkpoints bucket.
func CheckpointStream(s *Store) jetstream.Stream { return s.checkpointStream }

// DeleteEventsStream deletes the events stream, as deleting its directory
// does: the next Open makes it anew.
func DeleteEventsStream(ctx context.Context, s *Store) error {
	return s.js.DeleteStream(ctx, streamName)
}

// DeleteEvent deletes the events stream's message at stream sequence
// seq, as a tail lost to a damaged block does.
func DeleteEvent(ctx context.Context, s *Store, seq uint64) error {
	return s.stream.DeleteMsg(ctx, seq)
}
