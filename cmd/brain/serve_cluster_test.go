package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/internal/natstest"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/store"
)

func TestServeClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"node id without nats", []string{"--node-id", "a"}, "--node-id needs --nats"},
		{"bad node id", []string{"--nats", "nats://127.0.0.1:1", "--node-id", "a.b"}, `--node-id "a.b"`},
		{"advertise without node id", []string{"--advertise", "http://x:1"}, "need --node-id"},
		{"lease ttl without node id", []string{"--lease-ttl", "3s"}, "need --node-id"},
		{"lease ttl too short", []string{"--nats", "nats://127.0.0.1:1", "--node-id", "a", "--lease-ttl", "10ms"}, "at least 500ms"},
		{"advertise not a URL", []string{"--nats", "nats://127.0.0.1:1", "--node-id", "a", "--advertise", "10.0.0.5:7777"}, "base URL"},
		{"advertise with a path", []string{"--nats", "nats://127.0.0.1:1", "--node-id", "a", "--advertise", "http://h:1/x"}, "base URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := runServe(context.Background(), append([]string{"--data", t.TempDir()}, tc.args...), &out, &errb)
			if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want usage error with %q", code, errb.String(), tc.want)
			}
		})
	}
	t.Run("every interface needs --advertise", func(t *testing.T) {
		_, err := advertiseURL(serveArgs{}, &net.TCPAddr{IP: net.IPv4zero, Port: 7777}, "http")
		if err == nil || !strings.Contains(err.Error(), "--advertise") {
			t.Fatalf("err = %v", err)
		}
		u, err := advertiseURL(serveArgs{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7777}, "https")
		if err != nil || u != "https://127.0.0.1:7777" {
			t.Fatalf("advertise = %q, %v", u, err)
		}
	})
}

// natsCluster starts three in-process NATS servers with JetStream,
// clustered on loopback, and returns their client URLs.
func natsCluster(t *testing.T) []string {
	t.Helper()
	urls := natstest.StartCluster(t, 3)
	// Wait until the cluster has elected its JetStream leaders: an R3
	// store opens (a brain node would fail to start before that).
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := store.Open(ctx, &store.Options{URL: urls[0], Replicas: 3})
		cancel()
		if err == nil {
			_ = st.Close()
			return urls
		}
		if time.Now().After(deadline) {
			t.Fatalf("the NATS cluster has no JetStream: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // polling a cluster electing its leaders
	}
}

// dialRetry dials like dialPeer, retrying 503 (a session between nodes)
// until within has passed.
func dialRetry(t *testing.T, ctx context.Context, addr, token, sessionID, query string, within time.Duration) *peer {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, resp, err := websocket.Dial(dctx, "ws://"+addr+"/v1/sessions/"+sessionID+"/ws"+query,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		cancel()
		if err == nil {
			conn.SetReadLimit(8 << 20)
			t.Cleanup(func() { conn.CloseNow() })
			return &peer{t: t, conn: conn, ctx: ctx}
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond) // a client's retry delay
	}
}

// startCluster starts three `brain serve --nats --node-id` processes (the
// test binary, built once, as brain), node i on NATS server i, sharing the
// first node's tokens file, and returns them, their addresses and the
// token.
func startCluster(t *testing.T, urls []string, ttl string) ([]*exec.Cmd, []string, string) {
	t.Helper()
	ids := []string{"a", "b", "c"}
	cmds, addrs := make([]*exec.Cmd, len(ids)), make([]string, len(ids))
	var token, first string
	for i, id := range ids {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			// Every node serves the same tokens: copy the first node's file.
			raw, err := os.ReadFile(filepath.Join(first, "data", "tokens.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "data", "tokens.json"), raw, 0o600); err != nil {
				t.Fatal(err)
			}
		} else {
			first = dir
		}
		cmd, addr, tok := startBrain(t, dir, "--nats", urls[i], "--node-id", id, "--lease-ttl", ttl)
		if i == 0 {
			token = tok
		} else if tok != token {
			t.Fatalf("node %s did not take the copied tokens", id)
		}
		cmds[i], addrs[i] = cmd, addr
	}
	// A failure shows what each node said about sessions and leases
	// (registered after startBrain's cleanups, so it runs before them,
	// while the logs are there).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, cmd := range cmds {
			b, _ := os.ReadFile(filepath.Join(cmd.Dir, "brain.log"))
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "session") || strings.Contains(l, "lease") {
					lines = append(lines, l)
				}
			}
			t.Logf("node %s's log, its lines about sessions and leases (the last %d of %d):\n  %s", ids[i], min(len(lines), 80), len(lines), strings.Join(lines[max(0, len(lines)-80):], "\n  "))
		}
	})
	return cmds, addrs, token
}

// leaseHolder returns the node holding session id's lease once ok
// accepts it, polling for up to 5 s: the bucket's reads may be answered by
// a replica that has not applied the latest change yet.
func leaseHolder(t *testing.T, ctx context.Context, natsURL, id string, ttl time.Duration, ok func(string) bool) string {
	t.Helper()
	st, err := store.Open(ctx, &store.Options{URL: natsURL, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.Leases(ctx, &store.LeaseOptions{Node: "probe", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, held, err := l.Holder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			h.Node = ""
		}
		if ok(h.Node) || time.Now().After(deadline) {
			return h.Node
		}
		time.Sleep(50 * time.Millisecond) // polling a replica catching up
	}
}

// leaseDeleted reports whether the latest message of session id's lease
// is a delete marker: the lease was released (store.Lease.Release deletes
// the entry), where an expired one leaves no message at all. The marker
// itself expires a lease TTL later.
func leaseDeleted(t *testing.T, natsURL, id string) bool {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const bucket = "brain_session_leases" // store's lease bucket
	st, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "$KV."+bucket+"."+id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return m.Header.Get("KV-Operation") == "DEL" && m.Header.Get("Nats-Marker-Reason") == ""
}

// follow reads p's frames after seq until every call of want has ended,
// failing on a gap or a duplicate seq and on a call ending twice; it
// calls answer for each capability_invoked. It returns the last seq and
// each call's outcome.
func follow(t *testing.T, p *peer, seq uint64, want []string, answer func(*protocol.CapabilityInvoked)) (uint64, map[string]protocol.Outcome) {
	t.Helper()
	outcomes := map[string]protocol.Outcome{}
	done := func() bool {
		for _, c := range want {
			if _, ok := outcomes[c]; !ok {
				return false
			}
		}
		return true
	}
	for !done() {
		f := p.next()
		if f.Ref != "" {
			if f.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("reply %s: %+v", f.Ref, f.Msg)
			}
			continue
		}
		if f.Seq != seq+1 {
			t.Fatalf("got seq %d (%s) after %d: a gap or a duplicate", f.Seq, f.Msg.MessageType(), seq)
		}
		seq = f.Seq
		switch m := f.Msg.(type) {
		case *protocol.CapabilityInvoked:
			if answer != nil {
				answer(m)
			}
		case *protocol.CapabilityOutcome:
			if _, dup := outcomes[m.CallID]; dup {
				t.Fatalf("call %s ended twice", m.CallID)
			}
			outcomes[m.CallID] = m.Outcome
		}
	}
	return seq, outcomes
}

// TestServeClusterSIGKILL runs three `brain serve --nats --node-id`
// processes on a three-server NATS cluster (R3). A session placed on node
// a is used through b and c, which forward to a. With an agent-side call
// running (js.eval, invoked over MCP on a), an approval pending and a
// dispatched client-side call, node a is SIGKILLed: both peers resume on
// the surviving nodes with no gap and no duplicate, the approval is
// decided and the client-side call answered there, and every call ends
// exactly once — the agent-side one unavailable. Then the new owner is
// stopped with SIGTERM and hands the session to the last node before any
// lease expires.
func TestServeClusterSIGKILL(t *testing.T) {
	urls := natsCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const ttl = 3 * time.Second
	cmds, addrs, token := startCluster(t, urls, ttl.String())
	node := map[string]int{"a": 0, "b": 1, "c": 2}

	owner := dialPeer(t, ctx, addrs[0], token, "k", "") // placement: node a, which the first connection reached
	owner.until(protocol.TypeSnapshot)
	p := dialPeer(t, ctx, addrs[1], token, "k", "?after=0") // through b, forwarded to a
	q := dialPeer(t, ctx, addrs[2], token, "k", "?after=0") // through c, forwarded to a; it only watches
	show := protocol.Capability{Name: "ui.show", Description: "Show something.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}, Audience: []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}}
	p.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{approvalCap("ui.confirm"), show}})
	for f := p.next(); f.Ref != "r"; f = p.next() {
	}
	// An agent-side call that runs until its node dies.
	cs := mcpSession(t, ctx, addrs[0], tokenOf(t, filepath.Join(cmds[0].Dir, "data"), "model"), "k")
	mcpErr := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "js.eval", Arguments: map[string]any{"source": "() => { for (;;) {} }"}})
		if err == nil {
			err = fmt.Errorf("js.eval returned %+v", res)
		}
		mcpErr <- err
	}()
	var jsCall string
	for jsCall == "" {
		if m, ok := p.until(protocol.TypeCapabilityInvoked).Msg.(*protocol.CapabilityInvoked); ok && m.Name == "js.eval" {
			jsCall = m.CallID
		}
	}
	p.send("u1", &protocol.CapabilityInvoke{Name: "ui.confirm", Input: json.RawMessage(`{"what":"ship it"}`)})
	req := p.until(protocol.TypeApprovalRequested).Msg.(*protocol.ApprovalRequested)
	p.send("u2", &protocol.CapabilityInvoke{Name: "ui.show", Input: json.RawMessage(`{}`)})
	var inv *protocol.Frame
	for inv == nil || inv.Msg.(*protocol.CapabilityInvoked).Name != "ui.show" {
		inv = p.until(protocol.TypeCapabilityInvoked)
	}
	showCall, pSeen := inv.Msg.(*protocol.CapabilityInvoked).CallID, inv.Seq
	// The watcher has seen at least as far, or will: read it up to the same seq.
	qSeen := uint64(0)
	for qSeen < pSeen {
		if f := q.next(); f.Ref == "" && f.Seq != 0 {
			if _, snap := f.Msg.(*protocol.Snapshot); !snap && f.Seq != qSeen+1 {
				t.Fatalf("watcher: seq %d after %d", f.Seq, qSeen)
			}
			qSeen = f.Seq
		}
	}

	// MCP calls of an environment's tool in another session of node a,
	// through node c, back to back while a dies (mcpAcrossKill).
	const notes = "the same notes on every node"
	for _, c := range cmds {
		if err := os.WriteFile(filepath.Join(c.Dir, "workspace", "notes.txt"), []byte(notes), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkPeer := dialPeer(t, ctx, addrs[0], token, "mk", "") // placement: node a
	mkPeer.until(protocol.TypeSnapshot)
	mc := startMCPCallers(t, ctx, addrs[2], tokenOf(t, filepath.Join(cmds[0].Dir, "data"), "model"), "mk", notes, 2)
	mc.failFast = false
	mc.waitCalls(20, 30*time.Second)

	if err := cmds[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmds[0].Wait()
	killed := time.Now()
	atKill := mc.done.Load()
	select {
	case err := <-mcpErr:
		t.Logf("the MCP call on the dead node failed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the MCP call to the dead node did not fail")
	}
	p2 := dialRetry(t, ctx, addrs[1], token, "k", fmt.Sprintf("?after=%d", pSeen), 20*time.Second)
	t.Logf("resumed through node b %s after SIGKILL (lease TTL %s)", time.Since(killed).Round(10*time.Millisecond), ttl)
	q2 := dialRetry(t, ctx, addrs[2], token, "k", fmt.Sprintf("?after=%d", qSeen), 20*time.Second)
	p2.send("a", &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: req.InputDigest})
	p2.send("x", &protocol.CapabilityResult{CallID: showCall, Result: json.RawMessage(`"shown"`)})
	calls := []string{jsCall, req.CallID, showCall}
	seq, outcomes := follow(t, p2, pSeen, calls, func(m *protocol.CapabilityInvoked) {
		if m.CallID == req.CallID {
			p2.send("x2", &protocol.CapabilityResult{CallID: m.CallID, Result: json.RawMessage(`"shipped"`)})
		}
	})
	if o := outcomes[jsCall]; o.IsOK() || o.Err.Code != protocol.CodeUnavailable {
		t.Fatalf("the agent-side call running on the dead node: %+v, want unavailable", o)
	}
	if string(outcomes[req.CallID].Value) != `"shipped"` || string(outcomes[showCall].Value) != `"shown"` {
		t.Fatalf("outcomes = %+v", outcomes)
	}
	qSeq, qOutcomes := follow(t, q2, qSeen, calls, nil)
	for _, c := range calls {
		if a, b := outcomes[c], qOutcomes[c]; a.IsOK() != b.IsOK() || string(a.Value) != string(b.Value) {
			t.Fatalf("call %s: peer b saw %+v, peer c %+v", c, a, b)
		}
	}
	if qSeq > seq {
		seq = qSeq
	}
	mcpAcrossKill(t, ctx, mc, killed, atKill, addrs[2], token, "mk")

	// Graceful: SIGTERM on the new owner releases the session's lease —
	// the entry deleted, not left to expire — and the last node takes the
	// session at once.
	holder := leaseHolder(t, ctx, urls[0], "k", ttl, func(h string) bool { return h == "b" || h == "c" })
	from, ok := node[holder]
	if !ok || from == 0 {
		t.Fatalf("the session's lease is held by %q, want b or c", holder)
	}
	to := 3 - from // the other survivor
	if err := cmds[from].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Until the stopping node has released the lease, a connection
	// through the other node is forwarded to it, and closed when it
	// stops: connect once it has, as a peer whose connection closed does.
	if h := leaseHolder(t, ctx, urls[0], "k", ttl, func(h string) bool { return h != holder }); h == holder {
		t.Fatalf("node %s still holds the session's lease after SIGTERM", holder)
	}
	if !leaseDeleted(t, urls[0], "k") {
		t.Fatalf("node %s's lease expired instead of being released on SIGTERM", holder)
	}
	released := time.Since(stopped)
	p3 := dialRetry(t, ctx, addrs[to], token, "k", fmt.Sprintf("?after=%d", seq), 10*time.Second)
	p3.send("r2", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{show}})
	for f := p3.next(); f.Ref != "r2"; f = p3.next() {
		if f.Ref == "" && f.Seq != 0 {
			if f.Seq != seq+1 {
				t.Fatalf("after handover got seq %d (%s), want %d", f.Seq, f.Msg.MessageType(), seq+1)
			}
			seq = f.Seq
		}
	}
	t.Logf("graceful handover: lease released %s after SIGTERM, the session served by the last node after %s (lease TTL %s)",
		released.Round(10*time.Millisecond), time.Since(stopped).Round(10*time.Millisecond), ttl)
	want := []string{"a", "b", "c"}[to]
	if h := leaseHolder(t, ctx, urls[0], "k", ttl, func(h string) bool { return h == want }); h != want {
		t.Fatalf("after the handover the lease is held by %q", h)
	}
}
