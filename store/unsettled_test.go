package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/brainrt/brain/store"
)

// What a replicated stream's leader answers a publish that expects the
// subject's last sequence while another message of the subject is
// proposed and not yet applied (nats-server v2.15.2), and a plain
// mismatch.
const (
	inProcess     = `{"type":"io.nats.jetstream.api.v1.pub_ack_response","error":{"code":400,"err_code":10164,"description":"wrong last sequence"}}`
	wrongLastSeq  = `{"type":"io.nats.jetstream.api.v1.pub_ack_response","error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"}}`
	unsettledWait = 30 * time.Second // the store's default timeout is 5 s; a loaded machine's appends still end well within this
)

// TestAppendMeetsItsOwnAttemptInProcess: an append whose first attempt
// is stored but unanswered (a leader election) and whose repeat is told
// "wrong last sequence" because that attempt is still being applied is
// stored once, not taken for another owner's write — which handed a
// session over in a loaded TestServeClusterFaults. The same answer with
// nothing stored, and a mismatch the store's last event contradicts
// (this journal's own last), are sent again until they settle.
func TestAppendMeetsItsOwnAttemptInProcess(t *testing.T) {
	cases := []struct {
		name    string
		answers []string
	}{
		{"stored, unanswered, then in process", []string{store.Lost, inProcess, inProcess}},
		{"in process, nothing stored", []string{inProcess, inProcess}},
		{"a mismatch its own last event contradicts", []string{wrongLastSeq, wrongLastSeq}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t, t.TempDir(), nil)
			id := "u" + string(rune('a'+i))
			j := journal(t, st, id)
			appendAll(t, j, benchEvent(1), benchEvent(2))
			store.AnswerAttempts(st, tc.answers...)
			done := make(chan error, 1)
			go func() { done <- j.Append(benchEvent(3)) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("append 3: %v", err)
				}
			case <-time.After(unsettledWait):
				t.Fatalf("append 3 did not end within %s", unsettledWait)
			}
			appendAll(t, j, benchEvent(4)) // the journal goes on
			events := load(t, st, id)
			if len(events) != 4 {
				t.Fatalf("%d events stored, want 4 (each once)", len(events))
			}
			for k, e := range events {
				if e.Seq != uint64(k+1) {
					t.Fatalf("event %d has seq %d", k, e.Seq)
				}
			}
		})
	}
}

// TestAppendInProcessForever: a store that keeps saying "in process"
// fails the append with a clear error once the store's timeout has
// passed — it does not hang, and does not call it another owner's write.
func TestAppendInProcessForever(t *testing.T) {
	st := open(t, t.TempDir(), &store.Options{Timeout: time.Second})
	j := journal(t, st, "forever")
	appendAll(t, j, benchEvent(1))
	answers := make([]string, 1000)
	for i := range answers {
		answers[i] = inProcess
	}
	store.AnswerAttempts(st, answers...)
	done := make(chan error, 1)
	go func() { done <- j.Append(benchEvent(2)) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("append 2 succeeded, want an error")
		}
		if errors.Is(err, store.ErrConflict) {
			t.Fatalf("append 2: %v, want no conflict", err)
		}
		t.Logf("append 2: %v", err)
	case <-time.After(unsettledWait):
		t.Fatalf("append 2 did not end within %s", unsettledWait)
	}
}
