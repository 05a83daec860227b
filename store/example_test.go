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
