package store

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestParsePubAck: the hand-read acknowledgements and the fallback give
// what jetstream.PublishMsg would.
func TestParsePubAck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		want    jetstream.PubAck
		errCode jetstream.ErrorCode // an API error with this code
		err     error
	}{
		{name: "plain", data: `{"stream":"BRAIN_EVENTS","seq":42}`, want: jetstream.PubAck{Stream: streamName, Sequence: 42}},
		{name: "duplicate", data: `{"stream":"BRAIN_EVENTS","seq":7,"duplicate":true}`, want: jetstream.PubAck{Stream: streamName, Sequence: 7, Duplicate: true}},
		{name: "domain", data: `{"stream":"BRAIN_EVENTS","domain":"hub","seq":9}`, want: jetstream.PubAck{Stream: streamName, Sequence: 9, Domain: "hub"}},
		{name: "spaced", data: `{"stream": "BRAIN_EVENTS", "seq": 3}`, want: jetstream.PubAck{Stream: streamName, Sequence: 3}},
		{name: "largest seq", data: `{"stream":"BRAIN_EVENTS","seq":18446744073709551615}`, want: jetstream.PubAck{Stream: streamName, Sequence: 1<<64 - 1}},
		{name: "overflow", data: `{"stream":"BRAIN_EVENTS","seq":18446744073709551616}`, err: jetstream.ErrInvalidJSAck},
		{name: "wrong last sequence", data: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"BRAIN_EVENTS","seq":0}`,
			errCode: jetstream.JSErrCodeStreamWrongLastSequence},
		{name: "no stream", data: `{"seq":3}`, err: jetstream.ErrInvalidJSAck},
		{name: "not json", data: `+OK`, err: jetstream.ErrInvalidJSAck},
		{name: "empty", data: ``, err: jetstream.ErrInvalidJSAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ack, err := parsePubAck([]byte(tc.data))
			switch {
			case tc.errCode != 0:
				var apiErr *jetstream.APIError
				if !errors.As(err, &apiErr) || apiErr.ErrorCode != tc.errCode {
					t.Fatalf("error %v, want API error %d", err, tc.errCode)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case *ack != tc.want:
				t.Fatalf("ack %+v, want %+v", *ack, tc.want)
			}
		})
	}
}
