package host_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// enteringFS is blockingFS that says when a read of "block" has begun.
type enteringFS struct {
	blockingFS
	entered chan<- struct{}
}

func (e enteringFS) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if path == "block" {
		e.entered <- struct{}{}
	}
	return e.blockingFS.ReadFile(ctx, path)
}

// TestPoolSlotsPerSession: one session's calls that hold every slot of a
// tool's pool (stuck until their deadline) do not keep another session's
// call waiting — it runs at once, on a slot beyond PoolSize — while the
// stuck session's own next call waits for a slot as before. A probe's
// four sleeping calls of one session had held every other tenant's call
// of that tool until the 60 s deadline.
func TestPoolSlotsPerSession(t *testing.T) {
	h := newHost(t, &host.Options{PoolSize: 1})
	fs, _ := stallFS(t)
	entered := make(chan struct{}, 1)
	hs := tool.Handles{FS: enteringFS{blockingFS: fs.(blockingFS), entered: entered}}
	inst, err := load(t, h, "stall").Provision(context.Background(), hs, nil)
	must(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	call := func(session, input string, d time.Duration) (json.RawMessage, protocol.Code) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		v, err := inst.Invoke(ctx, &tool.Call{ID: "c", Session: session, Input: json.RawMessage(input), Handles: hs})
		if err != nil {
			return nil, protocol.OutcomeOf(err).Err.Code
		}
		return v, ""
	}

	stuck := make(chan protocol.Code, 1)
	go func() { _, code := call("a", `{"do":"read","path":"block"}`, time.Minute); stuck <- code }()
	testutil.Recv(t, entered, "session a's call to hold the pool's one slot")

	// Another session: at once, not after a's minute.
	if v, code := call("b", `{"do":"answer"}`, 30*time.Second); code != "" || string(v) != `"awake"` {
		t.Fatalf("session b beside a's stuck call: %s %q", v, code)
	}
	// a's own next call waits for a slot: its short deadline passes first.
	if _, code := call("a", `{"do":"answer"}`, 300*time.Millisecond); code != protocol.CodeTimeout {
		t.Fatalf("session a's second call: %q, want timeout (waiting for its slot)", code)
	}
	st := h.Stats()
	if len(st) != 1 || st[0].InUse != 1 {
		t.Fatalf("stats = %+v, want a's call alone in use", st)
	}
}
