package server

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// heldJournal stores an event once release is closed: an append riding
// out an election.
type heldJournal struct{ release chan struct{} }

func (j heldJournal) Append(session.Event) error { <-j.release; return nil }

// validLease is a lease that stays valid.
type validLease struct{}

func (validLease) Lost() <-chan struct{}         { return nil }
func (validLease) Valid() bool                   { return true }
func (validLease) Release(context.Context) error { return nil }

// TestAckWaitsOutAHeldAppend: the ack of a user invocation waits for its
// call's first event however long the append rides out an election
// within the store's hold (30 s), and the connection is not closed.
func TestAckWaitsOutAHeldAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := &fencedJournal{j: heldJournal{release}, lease: validLease{}, id: "s", onFail: func(error) {},
			failedCh: make(chan struct{}), started: map[string]chan struct{}{}}
		go func() {
			time.Sleep(30 * time.Second) // the store's longest hold
			close(release)
		}()
		go func() {
			invoked := &protocol.CapabilityInvoked{CallID: "c-1", Name: "ui.echo", Input: []byte(`{}`), InvokedBy: protocol.InvokedByAgent}
			if err := f.Append(session.Event{Seq: 1, Msg: invoked}); err != nil {
				t.Errorf("append: %v", err)
			}
		}()
		start := time.Now()
		if !f.admits(&protocol.Frame{Msg: &protocol.Ack{CallID: "c-1"}}) {
			t.Fatalf("the ack gave up after %s, while its event was being stored", time.Since(start))
		}
		if waited := time.Since(start); waited != 30*time.Second {
			t.Fatalf("the ack waited %s, want the append's 30 s", waited)
		}
	})
}
