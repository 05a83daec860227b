package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// A session journals to the store; after a restart, its events restore it.
func Example() {
	dir, _ := os.MkdirTemp("", "brain-store-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	st, err := store.Open(ctx, &store.Options{DataDir: dir})
	if err != nil {
		panic(err)
	}
	j, _ := st.Journal("demo")
	s := session.New("demo", &session.Options{Journal: j})
	_ = s.Register(session.Client, protocol.Capability{
		Name: "ui.toast", Description: "Show a toast", InputSchema: []byte(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient},
	})
	st.Close() // the process stops

	st, _ = store.Open(ctx, &store.Options{DataDir: dir})
	defer st.Close()
	events, _ := st.Load(ctx, "demo")
	j, _ = st.Journal("demo")
	r, _ := session.Restore("demo", events, &session.Options{Journal: j}, nil)
	_, ok := r.Lookup("ui.toast")
	ids, _ := st.Sessions(ctx)
	fmt.Println(len(events), "event; ui.toast restored:", ok, "; sessions:", ids)
	// Output: 1 event; ui.toast restored: true ; sessions: [demo]
}

// A hibernated session wakes with Resume: its events and the journal
// that continues them, in one read of the store.
func ExampleStore_Resume() {
	dir, _ := os.MkdirTemp("", "brain-store-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, &store.Options{DataDir: dir})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	j, _ := st.Journal("demo")
	s := session.New("demo", &session.Options{Journal: j})
	_ = s.Register(session.Client, protocol.Capability{
		Name: "ui.toast", Description: "Show a toast", InputSchema: []byte(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient},
	})

	events, j, err := st.Resume(ctx, "demo")
	if err != nil {
		panic(err)
	}
	r, _ := session.Restore("demo", events, &session.Options{Journal: j}, nil)
	err = r.Deregister(session.Client, "ui.toast") // journaled after the restored events
	again, _ := st.Load(ctx, "demo")
	fmt.Println(len(events), "event restored;", len(again), "stored after the deregister;", err)
	// Output: 1 event restored; 2 stored after the deregister; <nil>
}

// A session checkpointed as it hibernates wakes from its checkpoint: a
// few events instead of every one.
func ExampleStore_ResumeFrom() {
	dir, _ := os.MkdirTemp("", "brain-store-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, &store.Options{DataDir: dir})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	j, _ := st.Journal("demo")
	s := session.New("demo", &session.Options{Journal: j})
	for range 100 { // 200 events: a call and its outcome each
		s.Invoke(ctx, protocol.AudienceLLM, "__capabilities.list", []byte(`{}`))
	}
	if err := st.Checkpoint(ctx, "demo", nil); err != nil { // package server's, at hibernation
		panic(err)
	}

	cp, after, j, err := st.ResumeFrom(ctx, "demo")
	if err != nil {
		panic(err)
	}
	r, _ := session.RestoreFrom("demo", cp, after, &session.Options{Journal: j, History: j.(session.EventReader)}, nil)
	fmt.Println("at seq", r.LastSeq(), "from", len(cp.State)+len(cp.Latest), "events and", len(after), "after them")
	// Output: at seq 200 from 32 events and 0 after them
}
