package store

import (
	"context"
	"testing"
	"time"
)

// TestDirectGetCounts holds the embedded server to the batch protocol
// loadDirect reads: a batch asked for without headers sends the subject's
// messages from its start sequence on, in order, at most batch of them,
// and at least one whatever max_bytes; it ends with a status whose
// pending count is the subject's messages from the start sequence on —
// not decremented by what the batch sent — and whose last sequence is the
// batch's last; from past the subject's last message it is a 404. If an
// upgrade of nats-server changes any of it, loadDirect must change too.
func TestDirectGetCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, &Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var seqs []uint64 // of session "s"'s messages
	for i := range 5 {
		for _, id := range []string{"s", "other"} {
			ack, err := s.js.Publish(ctx, subjectPrefix+id, []byte{'a' + byte(i)})
			if err != nil {
				t.Fatal(err)
			}
			if id == "s" {
				seqs = append(seqs, ack.Sequence)
			}
		}
	}
	for _, tt := range []struct {
		name       string
		from       uint64
		batch, max int
		want       string // the messages' data
		end        batchEnd
	}{
		{"the first two", 1, 2, 1 << 20, "ab", batchEnd{found: true, sent: 2, pending: 5, last: seqs[1]}},
		{"the rest", seqs[1] + 1, 10, 1 << 20, "cde", batchEnd{found: true, sent: 3, pending: 3, last: seqs[4]}},
		{"from between two", seqs[2] - 1, 10, 1 << 20, "cde", batchEnd{found: true, sent: 3, pending: 3, last: seqs[4]}},
		{"max bytes below a message", seqs[1], 10, 1, "b", batchEnd{found: true, sent: 1, pending: 4, last: seqs[1]}},
		{"past the last", seqs[4] + 1, 10, 1 << 20, "", batchEnd{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s.loadMaxBytes = tt.max
			var got []byte
			end, err := s.directGetOnce(ctx, subjectPrefix+"s", tt.from, tt.batch, func(data []byte) error {
				got = append(got, data...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want || end != tt.end {
				t.Fatalf("got %q and %+v, want %q and %+v", got, end, tt.want, tt.end)
			}
		})
	}
}
