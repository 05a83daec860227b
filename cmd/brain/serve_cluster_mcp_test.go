package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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

	logFrom := map[*brainNode]int{owner: len(owner.log()), via: len(via.log())}
	mc := startMCPCallers(t, ctx, via.addr, model, id, content, 2)
	mc.waitCalls(20, 30*time.Second) // calls running before the stop
	before := mc.done.Load()
	took := owner.term(30 * time.Second)
	during := mc.done.Load() - before
	mc.waitCalls(mc.done.Load()+40, 30*time.Second) // and after it, on the next owner
	failed, longest := mc.stop()
	if len(failed) > 0 {
		for n, from := range logFrom {
			l := n.log()[from:]
			t.Logf("node %s's warnings and errors during the step:\n%s\n%s", n.id, grepLines(l, "level=WARN"), grepLines(l, "level=ERROR"))
		}
		t.Fatalf("%d MCP calls through node %s failed across the stop of node %s (%d succeeded), the first: %s",
			len(failed), via.id, owner.id, mc.done.Load(), failed[0])
	}
	total := int(mc.done.Load())
	held := heldLeases(t, ctx, pcURL, []string{id})
	t.Logf("node %s stopped in %s; %d MCP calls through node %s (%d while it stopped), none failed, the longest %s; the session is now on node %s",
		owner.id, took.Round(time.Millisecond), total, via.id, during, longest.Round(time.Millisecond), held[id])

	// The log holds one successful outcome per call: none lost, none run
	// twice.
	seq1, _ := via.sessionRow(ctx, token, id, 20*time.Second)
	ok, bad := outcomesAfter(t, ctx, via.addr, token, id, seq0, seq1)
	if bad > 0 || ok != total {
		t.Fatalf("session %s's log holds %d successful outcomes and %d others, the client received %d results", id, ok, bad, total)
	}

	owner.start()
	waitReady(t, ctx, owner, time.Minute)
	return total, longest
}

// mcpCallers are MCP clients' calls of fs.read, made back to back by n
// callers on one go-sdk client session (as a host would run it: its
// Streamable HTTP client with its default retries of the notification
// stream) through addr, each checked for content, until stop.
type mcpCallers struct {
	done    atomic.Int64 // calls that returned their result
	halt    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	longest time.Duration
	failed  []string
	// failedAt and okAt are when each failed call started, and when each
	// successful one did.
	failedAt, okAt []time.Time
	// failFast stops a caller at its first failure; otherwise it goes on.
	failFast bool
}

func startMCPCallers(t *testing.T, ctx context.Context, addr, model, id, content string, n int) *mcpCallers {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "handover-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/v1/sessions/" + id + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{model, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("mcp connect through %s: %v", addr, err)
	}
	t.Cleanup(func() { cs.Close() })
	mc := &mcpCallers{halt: make(chan struct{}), failFast: true}
	for i := range n {
		mc.wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-mc.halt:
					return
				default:
				}
				start := time.Now()
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "notes.txt"}})
				cancel()
				took := time.Since(start)
				var bad string
				switch {
				case err != nil:
					bad = fmt.Sprintf("caller %d, call %d after %s: %v", i, k, took.Round(time.Millisecond), err)
				case res.IsError || len(res.Content) == 0:
					bad = fmt.Sprintf("caller %d, call %d after %s: an error result %s", i, k, took.Round(time.Millisecond), contentText(res.Content))
				default:
					if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, content) {
						bad = fmt.Sprintf("caller %d, call %d: result %+v", i, k, res.Content[0])
					}
				}
				mc.mu.Lock()
				mc.longest = max(mc.longest, took)
				if bad != "" {
					mc.failed = append(mc.failed, bad)
					mc.failedAt = append(mc.failedAt, start)
				} else {
					mc.done.Add(1)
					mc.okAt = append(mc.okAt, start)
				}
				mc.mu.Unlock()
				if bad != "" && mc.failFast {
					return
				}
			}
		})
	}
	return mc
}

// waitCalls waits until n calls in all have returned their result, or a
// call failed (with failFast), for up to within.
func (mc *mcpCallers) waitCalls(n int64, within time.Duration) {
	deadline := time.Now().Add(within)
	for mc.done.Load() < n {
		mc.mu.Lock()
		bad := mc.failFast && len(mc.failed) > 0
		mc.mu.Unlock()
		if bad || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a count, for at most within
	}
}

// stop ends the calls and returns the failures and the longest call.
func (mc *mcpCallers) stop() ([]string, time.Duration) {
	close(mc.halt)
	mc.wg.Wait()
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.failed, mc.longest
}

// outcomesAfter reads session id's log from seq0 to seq1 through addr and
// counts its call outcomes: successful, and others.
func outcomesAfter(t *testing.T, ctx context.Context, addr, token, id string, seq0, seq1 uint64) (ok, bad int) {
	t.Helper()
	r, err := dialClient(ctx, addr, token, id, fmt.Sprintf("?after=%d", seq0), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.conn.CloseNow()
	r.seq = seq0
	for r.seq < seq1 {
		f, err := r.next(ctx)
		if err != nil {
			t.Fatalf("reading session %s's log after %d: %v", id, r.seq, err)
		}
		if o, isOutcome := f.Msg.(*protocol.CapabilityOutcome); isOutcome && f.Ref == "" {
			if o.Outcome.IsOK() {
				ok++
			} else {
				bad++
				t.Logf("session %s's log: call %s ended %s: %s", id, o.CallID, o.Outcome.Err.Code, o.Outcome.Err.Message)
			}
		}
	}
	return ok, bad
}

// mcpAcrossKill is TestServeClusterSIGKILL's MCP part: calls made through
// node c to a session of node a, back to back by two callers, across a's
// SIGKILL at killed. A call a caller had in flight on a when it died (or
// sent on a connection to a that had not yet been seen closed) fails with
// 503 — the forwarding node cannot know whether it was served, and says
// so — and its outcome is in the log; every later call waits for the
// lease to lapse and is served by the next owner: once a call has
// succeeded after the kill, none fails. The log holds a successful outcome
// for every result returned, and at most one more per call that failed:
// no result lost, no call run twice.
func mcpAcrossKill(t *testing.T, ctx context.Context, mc *mcpCallers, killed time.Time, atKill int64, addr, token, id string) {
	t.Helper()
	mc.waitCalls(mc.done.Load()+40, 30*time.Second)
	failed, longest := mc.stop()
	total := int(mc.done.Load())
	if total < int(atKill)+40 {
		t.Fatalf("MCP calls through node c: %d results after the kill, want 40 or more (%d failed: %q)", total-int(atKill), len(failed), failed)
	}
	var servedAgain time.Time // the first successful call sent after the kill
	for _, at := range mc.okAt {
		if at.After(killed) && (servedAgain.IsZero() || at.Before(servedAgain)) {
			servedAgain = at
		}
	}
	for i, f := range failed {
		if !mc.failedAt[i].Before(servedAgain) {
			t.Fatalf("an MCP call sent %s after the kill, once calls were served again (%s after it), failed: %s",
				mc.failedAt[i].Sub(killed).Round(time.Millisecond), servedAgain.Sub(killed).Round(time.Millisecond), f)
		}
		if !strings.Contains(f, "Service Unavailable") {
			t.Fatalf("an MCP call in flight when its session's owner died: %s, want 503 (its owner went away before answering)", f)
		}
	}
	seq, _ := (&brainNode{t: t, addr: addr}).sessionRow(ctx, token, id, 20*time.Second)
	ok, bad := outcomesAfter(t, ctx, addr, token, id, 0, seq)
	if ok < total || ok+bad > total+len(failed) {
		t.Fatalf("session %s's log holds %d successful outcomes and %d others; the callers got %d results and %d failures", id, ok, bad, total, len(failed))
	}
	t.Logf("MCP calls through node c across the SIGKILL of node a: %d results (%d after the kill; served again %s after it), %d failed (in flight on a: %q), the longest %s; the log holds %d successful outcomes, %d others",
		total, total-int(atKill), servedAgain.Sub(killed).Round(time.Millisecond), len(failed), failed, longest.Round(time.Millisecond), ok, bad)
}

// contentText is what a result's content says, for a failure message (the
// content's values are pointers: %+v would print addresses).
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, strconv.Quote(tc.Text))
		} else {
			parts = append(parts, fmt.Sprintf("%T", c))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
