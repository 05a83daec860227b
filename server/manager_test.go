package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// memStore is a server.Store in memory; frames round-trip through the codec
// as they would through JetStream.
type memStore struct {
	mu     sync.Mutex
	frames map[string][][]byte
}

type memJournal struct {
	st *memStore
	id string
}

func (j memJournal) Append(e session.Event) error {
	b, err := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
	if err != nil {
		return err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	j.st.frames[j.id] = append(j.st.frames[j.id], b)
	return nil
}

func (st *memStore) Journal(id string) (session.Journal, error) { return memJournal{st, id}, nil }

func (st *memStore) Load(_ context.Context, id string) ([]session.Event, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []session.Event
	for _, b := range st.frames[id] {
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			return nil, err
		}
		out = append(out, session.Event{Seq: f.Seq, Msg: f.Msg})
	}
	return out, nil
}

// TestALeftSessionWritesNothing: a session object that left memory
// (hibernated here; a lost lease, a stop, the same) stores nothing more —
// a timer of its own firing late (a restore's peer grace, deregistering
// what was not registered again) would otherwise write into the session's
// journal behind its next incarnation's back.
func TestALeftSessionWritesNothing(t *testing.T) {
	st := &memStore{frames: map[string][][]byte{}}
	mgr := server.NewManager(server.ManagerOptions{Store: st})
	ctx := context.Background()
	s, release, err := mgr.Acquire(ctx, "left")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(session.Client, clientCap("ui.keep", false)); err != nil {
		t.Fatal(err)
	}
	release()
	if n := mgr.Hibernate(0); n != 1 {
		t.Fatalf("hibernated %d sessions, want 1", n)
	}
	st.mu.Lock()
	stored := len(st.frames["left"])
	st.mu.Unlock()
	// The object left behind changes.
	if err := s.Register(session.Client, clientCap("ui.late", false)); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	after := len(st.frames["left"])
	st.mu.Unlock()
	if after != stored {
		t.Fatalf("the hibernated session's object stored %d more events", after-stored)
	}
	s2, release2, err := mgr.Acquire(ctx, "left")
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if _, ok := s2.Lookup("ui.late"); ok {
		t.Fatal("the woken session holds what its left object registered")
	}
}

// TestHibernateAndWake: an idle session leaves memory and comes back, with
// its registry and its seq, on the next use; a held session, or one with a
// pending call, stays.
func TestHibernateAndWake(t *testing.T) {
	st := &memStore{frames: map[string][][]byte{}}
	attached, released := 0, 0
	mgr := server.NewManager(server.ManagerOptions{Store: st,
		Attach:  func(*session.Session) error { attached++; return nil },
		Release: func(*session.Session) { released++ }})
	ctx := context.Background()
	s, release, err := mgr.Acquire(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(session.Client, clientCap("ui.keep", false)); err != nil {
		t.Fatal(err)
	}
	seq := s.LastSeq()
	if n := mgr.Hibernate(0); n != 0 {
		t.Fatalf("hibernated %d sessions while one was held", n)
	}
	release()
	if n := mgr.Hibernate(0); n != 1 || mgr.Live() != 0 || released != 1 {
		t.Fatalf("hibernated %d, live %d, released %d", n, mgr.Live(), released)
	}
	s2, release2, err := mgr.Acquire(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if s2 == s {
		t.Fatal("the hibernated session was not dropped")
	}
	if _, ok := s2.Lookup("ui.keep"); !ok || s2.LastSeq() != seq || attached != 2 {
		t.Fatalf("woken session: registry %v, seq %d (want %d), attached %d", ok, s2.LastSeq(), seq, attached)
	}
	// A session with a pending call stays in memory.
	go s2.Invoke(ctx, protocol.AudienceLLM, "ui.keep", []byte(`{"n":1}`))
	sub := s2.Subscribe(seq)
	defer sub.Close()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Msg.MessageType() == protocol.TypeCapabilityInvoked {
			break
		}
	}
	release2()
	if n := mgr.Hibernate(0); n != 0 {
		t.Fatalf("hibernated a session with a pending call")
	}
}

func TestHibernateNeedsAStore(t *testing.T) {
	mgr := server.NewManager(server.ManagerOptions{})
	_, release, _ := mgr.Acquire(context.Background(), "x")
	release()
	if n := mgr.Hibernate(0); n != 0 || mgr.Live() != 1 {
		t.Fatal("without a store a hibernated session would be lost")
	}
}

// resumingStore is a memStore that is also a server.Resumer, and counts
// how sessions were opened.
type resumingStore struct {
	*memStore
	resumed, journals int
}

func (st *resumingStore) Journal(id string) (session.Journal, error) {
	st.journals++
	return st.memStore.Journal(id)
}

func (st *resumingStore) Resume(ctx context.Context, id string) ([]session.Event, session.Journal, error) {
	st.resumed++
	events, err := st.memStore.Load(ctx, id)
	return events, memJournal{st.memStore, id}, err
}

// TestManagerResumes: a Manager whose store is a Resumer opens sessions
// with Resume alone — the load and the journal in one — and a session
// woken so goes on journaling where it stopped.
func TestManagerResumes(t *testing.T) {
	st := &resumingStore{memStore: &memStore{frames: map[string][][]byte{}}}
	mgr := server.NewManager(server.ManagerOptions{Store: st})
	ctx := context.Background()
	s, release, err := mgr.Acquire(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(session.Client, clientCap("ui.keep", false)); err != nil {
		t.Fatal(err)
	}
	release()
	if n := mgr.Hibernate(0); n != 1 {
		t.Fatalf("hibernated %d sessions, want 1", n)
	}
	s, release, err = mgr.Acquire(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, ok := s.Lookup("ui.keep"); !ok {
		t.Fatal("the woken session lost its capability")
	}
	if err := s.Register(session.Client, clientCap("ui.more", false)); err != nil {
		t.Fatal(err)
	}
	if st.resumed != 2 || st.journals != 0 {
		t.Fatalf("opened with Resume %d times and Journal %d, want 2 and 0", st.resumed, st.journals)
	}
	events, _ := st.Load(ctx, "r")
	if n := len(events); n != 2 || events[1].Seq != 2 {
		t.Fatalf("stored %d events (the last seq %d), want 2, the second seq 2", n, events[n-1].Seq)
	}
}
