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

// TestTryNextOrNotify: without an event it arranges a call on the next
// append, allocating nothing once the session has a subscriber waiting,
// and calls it once; then it returns the event; after Close it says so and
// arranges nothing.
func TestTryNextOrNotify(t *testing.T) {
	s := session.New("try-notify", nil)
	sub := s.Subscribe(0)
	var woken int
	wake := func() { woken++ }
	if _, ok, err := sub.TryNextOrNotify(wake); ok || err != nil {
		t.Fatalf("TryNextOrNotify on an empty log = ok %v, err %v; want neither", ok, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { sub.TryNextOrNotify(wake) }); allocs != 0 {
		t.Errorf("a wait allocates %.1f times, want none", allocs)
	}
	if woken != 0 {
		t.Fatalf("woken %d times before any event", woken)
	}
	if err := s.Register(session.Client, clientCap("ui.a")); err != nil {
		t.Fatal(err)
	}
	if woken != 1 {
		t.Fatalf("woken %d times by one append, want once", woken)
	}
	ev, ok, err := sub.TryNextOrNotify(wake)
	if !ok || err != nil || ev.Seq != 1 || ev.Msg.MessageType() != protocol.TypeCapabilityRegister {
		t.Fatalf("TryNextOrNotify = %+v, ok %v, err %v; want seq 1 capability_register", ev, ok, err)
	}
	if err := s.Register(session.Client, clientCap("ui.b")); err != nil {
		t.Fatal(err)
	}
	if woken != 1 {
		t.Fatalf("woken by an append nobody waited for (%d times)", woken)
	}
	sub.Close()
	if _, ok, err := sub.TryNextOrNotify(wake); ok || !errors.Is(err, session.ErrSubscriptionClosed) {
		t.Fatalf("TryNextOrNotify after Close = ok %v, err %v", ok, err)
	}
	if err := s.Register(session.Client, clientCap("ui.c")); err != nil {
		t.Fatal(err)
	}
	if woken != 1 {
		t.Fatalf("a closed subscription was woken (%d times)", woken)
	}
}
