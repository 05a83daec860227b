package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
)

// mcpHandover is TestServeClusterFaults' MCP step: an MCP client connected
// to node via (which does not own the session) calls fs.read steadily, two
// calls at a time, while owner — the session's owner — stops on SIGTERM.
// Every call must succeed with its result (zero failed, zero lost), and
// the session's log must hold exactly one successful outcome per call:
// none lost, none run twice. The owner is started again afterwards. It
// returns the calls made and the longest one.
func mcpHandover(t *testing.T, ctx context.Context, pcURL string, owner, via *brainNode, model, token string) (int, time.Duration) {
	t.Helper()
	const id = "mcp-h"
	const content = "the same notes on every node"
	for _, n := range []*brainNode{owner, via} {
		if err := os.WriteFile(filepath.Join(n.dir, "workspace", "notes.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The session is placed on owner: the first connection reaches it.
	p, err := dialClient(ctx, owner.addr, token, id, "", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.conn.CloseNow()
	if held := heldLeases(t, ctx, pcURL, []string{id}); held[id] != owner.id {
		t.Fatalf("session %s is held by %v, want node %s", id, held, owner.id)
	}
	seq0, _ := via.sessionRow(ctx, token, id, 20*time.Second)

	// The client as a host would run it: go-sdk's Streamable HTTP client
	// with its default retries of the notification stream.
	client := mcp.NewClient(&mcp.Implementation{Name: "handover-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + via.addr + "/v1/sessions/" + id + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{model, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("mcp connect through node %s: %v", via.id, err)
	}
	defer cs.Close()

	const callers = 2
	var (
		done    atomic.Int64 // calls that returned their result
		stop    = make(chan struct{})
		mu      sync.Mutex
		longest time.Duration
		failed  []string
		wg      sync.WaitGroup
	)
	for i := range callers {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "notes.txt"}})
				cancel()
				took := time.Since(start)
				mu.Lock()
				longest = max(longest, took)
				switch {
				case err != nil:
					failed = append(failed, fmt.Sprintf("caller %d, call %d after %s: %v", i, k, took.Round(time.Millisecond), err))
				case res.IsError || len(res.Content) == 0:
					failed = append(failed, fmt.Sprintf("caller %d, call %d after %s: an error result %+v", i, k, took.Round(time.Millisecond), res.Content))
				default:
					if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, content) {
						failed = append(failed, fmt.Sprintf("caller %d, call %d: result %+v", i, k, res.Content[0]))
					} else {
						done.Add(1)
					}
				}
				n := len(failed)
				mu.Unlock()
				if n > 0 {
					return
				}
			}
		})
	}
	// waitCalls waits until n calls in all have returned their result, or
	// a call failed, for up to within.
	waitCalls := func(n int64, within time.Duration) {
		deadline := time.Now().Add(within)
		for done.Load() < n {
			mu.Lock()
			bad := len(failed) > 0
			mu.Unlock()
			if bad || time.Now().After(deadline) {
				return
			}
			time.Sleep(10 * time.Millisecond) // polling a count, for at most within
		}
	}
	waitCalls(20, 30*time.Second) // calls running before the stop
	before := done.Load()
	took := owner.term(30 * time.Second)
	during := done.Load() - before
	waitCalls(done.Load()+40, 30*time.Second) // and after it, on the next owner
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d MCP calls through node %s failed across the stop of node %s (%d succeeded), the first: %s",
			len(failed), via.id, owner.id, done.Load(), failed[0])
	}
	total := int(done.Load())
	held := heldLeases(t, ctx, pcURL, []string{id})
	t.Logf("node %s stopped in %s; %d MCP calls through node %s (%d while it stopped), none failed, the longest %s; the session is now on node %s",
		owner.id, took.Round(time.Millisecond), total, via.id, during, longest.Round(time.Millisecond), held[id])

	// The log holds one successful outcome per call: none lost, none run
	// twice.
	seq1, _ := via.sessionRow(ctx, token, id, 20*time.Second)
	r, err := dialClient(ctx, via.addr, token, id, fmt.Sprintf("?after=%d", seq0), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.conn.CloseNow()
	r.seq = seq0
	ok := 0
	for r.seq < seq1 {
		f, err := r.next(ctx)
		if err != nil {
			t.Fatalf("reading session %s's log after %d: %v", id, r.seq, err)
		}
		if o, isOutcome := f.Msg.(*protocol.CapabilityOutcome); isOutcome && f.Ref == "" {
			if !o.Outcome.IsOK() {
				t.Fatalf("session %s's log: call %s ended %+v", id, o.CallID, o.Outcome)
			}
			ok++
		}
	}
	if ok != total {
		t.Fatalf("session %s's log holds %d successful outcomes, the client received %d results", id, ok, total)
	}

	owner.start()
	waitReady(t, ctx, owner, time.Minute)
	return total, longest
}
