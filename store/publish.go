package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pubRetryWait is the pause before a publish that met no responders (a
// stream between leaders) is sent again, until its timeout: an election
// on a loaded cluster can outlast jetstream.PublishMsg's two attempts,
// and in a cluster a failed append hands the session over (server's
// cluster.go), so riding it out is cheaper.
const pubRetryWait = jetstream.DefaultPubRetryWait

// pubAttempt bounds one attempt of a publish: one sent while a stream's
// leader steps down can go unanswered (measured: a journal append waited
// out the whole 5 s timeout), and is sent again until the timeout — its
// expected last subject sequence (and, on an external server, its message
// id) make a repeat harmless.
const pubAttempt = time.Second

// maxAppendHold bounds how long an append rides out a stream without a
// leader while its journal's hold (HoldWhile) says so: a lease valid that
// long is being renewed, so only this stream is between leaders, and an
// election takes a few seconds.
const maxAppendHold = 30 * time.Second

// request publishes m to the stream and waits for its acknowledgement:
// what jetstream.PublishMsg does, with the same errors, minus what it
// costs per call that a journal does not need (a context and its timer,
// the options, reflection over the acknowledgement): a publish whose
// acknowledgement comes back on a reply slot (reply.go), read by hand
// when it has the usual form.
//
// A publish that meets no responders, goes unanswered, or is refused by
// a stream between leaders is sent again until timeout has passed — or,
// while hold reports true, until maxAppendHold has — unless the store
// knows it is unreachable or has no quorum (health.go).
func (s *Store) request(m *nats.Msg, timeout time.Duration, hold func() bool) (*jetstream.PubAck, error) {
	if h := s.failing(); h != nil && h.State == HealthWriteFailed { // it would only wait to be refused
		return nil, &UnavailableError{Op: "append an event", Health: *h}
	}
	sl, err := s.replies.take(s.nc)
	if err != nil {
		return nil, err
	}
	defer s.replies.give(sl)
	start := time.Now()
	// left is how long the retries may go on.
	left := func() time.Duration {
		d := timeout - time.Since(start)
		if d <= 0 && hold != nil && hold() {
			d = maxAppendHold - time.Since(start)
		}
		return d
	}
	var ack *jetstream.PubAck
	attempt := 0
	resp, err := s.attempt(sl, m, min(timeout, pubAttempt), &attempt)
	if err == nil {
		ack, err = parsePubAck(resp.Data)
	}
	for err != nil && pubRetryable(err) {
		wait := left()
		if wait <= 0 {
			break
		}
		s.kickHealth()
		if h := s.failing(); h != nil {
			return nil, &UnavailableError{Op: "append an event", Health: *h, Err: err}
		}
		if !errors.Is(err, nats.ErrTimeout) {
			// Answered at once (no responders, a new leader not ready):
			// pause before sending again.
			t := time.NewTimer(min(pubRetryWait, wait))
			select {
			case <-t.C:
			case <-s.badChan():
				t.Stop()
			}
			if wait = left(); wait <= 0 {
				break
			}
		}
		resp, err = s.attempt(sl, m, min(wait, pubAttempt), &attempt)
		if err == nil {
			ack, err = parsePubAck(resp.Data)
		}
	}
	switch {
	case err == nil:
		return ack, nil
	case errors.Is(err, nats.ErrNoResponders):
		return nil, jetstream.ErrNoStreamResponse
	}
	return nil, err
}

// attempt sends m once on slot sl and waits at most timeout for its
// answer; *n counts the publish's attempts. A test's answerHook may
// answer in the server's place.
func (s *Store) attempt(sl *replySlot, m *nats.Msg, timeout time.Duration, n *int) (*nats.Msg, error) {
	*n++
	if s.answerHook != nil {
		if resp, err, ok := s.answerHook(m); ok {
			return resp, err
		}
	}
	return sl.request(s.nc, s.connClosed, m, timeout)
}

// pubRetryable reports a publish's error that a later attempt may not
// meet: no responders (a stream without a leader), no answer, a new
// leader not ready yet, or an earlier attempt still being replicated.
func pubRetryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10163, // expected last sequence per subject temporarily unavailable (a new leader)
			10008, // JetStream system temporarily unavailable
			10158, // duplicate message id is in process (an earlier attempt not yet committed)
			// "wrong last sequence", as a replicated stream's leader says
			// it of a single publish while another message of the same
			// subject is proposed and not yet applied (nats-server
			// v2.15.2, jetstream_batching.go): not a sequence it compared
			// but one it cannot compare yet. An attempt that went
			// unanswered in an election and is still being replicated
			// makes its own repeat meet it; once it is applied the repeat
			// is a duplicate, or a real mismatch (10071) that resync
			// reads. A journal that took it for another owner's write
			// handed its session over (TestServeClusterFaults in a loaded
			// run). Batches, the one other place it is said, are not used.
			jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return true
		}
		return false
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout)
}

// parsePubAck reads a publish acknowledgement, or the error in its place.
func parsePubAck(data []byte) (*jetstream.PubAck, error) {
	if ack, ok := parsePlainPubAck(data); ok {
		return ack, nil
	}
	var resp struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("nats: %w", resp.Error)
	}
	if resp.PubAck == nil || resp.PubAck.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return resp.PubAck, nil
}

// parsePlainPubAck reads the two forms an acknowledgement of the events
// stream has on an embedded server or one without domains —
// {"stream":"BRAIN_EVENTS","seq":N} and the same with "duplicate":true —
// and nothing else (ok false).
func parsePlainPubAck(data []byte) (*jetstream.PubAck, bool) {
	const head = `{"stream":"` + streamName + `","seq":`
	rest, ok := bytes.CutPrefix(data, []byte(head))
	if !ok {
		return nil, false
	}
	n, seq := 0, uint64(0)
	for ; n < len(rest) && rest[n] >= '0' && rest[n] <= '9'; n++ {
		d := uint64(rest[n] - '0')
		if seq > (math.MaxUint64-d)/10 {
			return nil, false // overflows
		}
		seq = seq*10 + d
	}
	if n == 0 || (n > 1 && rest[0] == '0') {
		return nil, false
	}
	ack := &jetstream.PubAck{Stream: streamName, Sequence: seq}
	switch string(rest[n:]) {
	case "}":
	case `,"duplicate":true}`:
		ack.Duplicate = true
	default:
		return nil, false
	}
	return ack, true
}
