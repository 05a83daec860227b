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

// request publishes m to the stream and waits at most timeout for its
// acknowledgement: what jetstream.PublishMsg does, with the same errors,
// minus what it costs per call that a journal does not need (a context
// and its timer, the options, reflection over the acknowledgement): a
// publish whose acknowledgement comes back on a reply slot (reply.go),
// read by hand when it has the usual form.
func (s *Store) request(m *nats.Msg, timeout time.Duration) (*jetstream.PubAck, error) {
	sl, err := s.replies.take(s.nc)
	if err != nil {
		return nil, err
	}
	defer s.replies.give(sl)
	deadline := time.Now().Add(timeout)
	resp, err := sl.request(s.nc, s.connClosed, m, min(timeout, pubAttempt))
	for errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if errors.Is(err, nats.ErrNoResponders) {
			t := time.NewTimer(min(pubRetryWait, left))
			<-t.C
			if left = time.Until(deadline); left <= 0 {
				err = nats.ErrTimeout
				break
			}
		}
		resp, err = sl.request(s.nc, s.connClosed, m, min(left, pubAttempt))
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, jetstream.ErrNoStreamResponse
	case err != nil:
		return nil, err
	}
	return parsePubAck(resp.Data)
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
