package session_test

import (
	"errors"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestTryNext: without an event TryNext returns a wake channel that the next
// event closes; then it returns that event, in order; after Close it says
// so.
func TestTryNext(t *testing.T) {
	s := session.New("try", nil)
	sub := s.Subscribe(0)
	_, ok, wake, err := sub.TryNext()
	if ok || err != nil || wake == nil {
		t.Fatalf("TryNext on an empty log = ok %v, wake %v, err %v; want a wake channel", ok, wake, err)
	}
	select {
	case <-wake:
		t.Fatal("woken before any event")
	default:
	}
	if err := s.Register(session.Client, clientCap("ui.a")); err != nil {
		t.Fatal(err)
	}
	<-wake // closed by the append
	ev, ok, _, err := sub.TryNext()
	if !ok || err != nil || ev.Seq != 1 || ev.Msg.MessageType() != protocol.TypeCapabilityRegister {
		t.Fatalf("TryNext = %+v, ok %v, err %v; want seq 1 capability_register", ev, ok, err)
	}
	if _, ok, _, _ := sub.TryNext(); ok {
		t.Fatal("a second event out of one append")
	}
	sub.Close()
	if _, ok, _, err := sub.TryNext(); ok || !errors.Is(err, session.ErrSubscriptionClosed) {
		t.Fatalf("TryNext after Close = ok %v, err %v", ok, err)
	}
}
