package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

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

// TestServeClusterSIGKILL runs two `brain serve --nats --node-id` processes
// on a three-server NATS cluster. A session is used through the node that
// does not own it; the owner is SIGKILLed with an approval and a dispatched
// client-side call in flight; the peer resumes on the other node with no
// gap and no duplicate and both calls end there. Then that node is stopped
// with SIGTERM and hands the session back before any lease expires.
func TestServeClusterSIGKILL(t *testing.T) {
	urls := natsCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const ttl = "3s"
	dirA, dirB := t.TempDir(), t.TempDir()
	for _, d := range []string{dirA, dirB} {
		if err := os.MkdirAll(filepath.Join(d, "workspace"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmdA, addrA, token := startBrain(t, dirA, "--nats", urls[0], "--node-id", "a", "--lease-ttl", ttl)
	// Every node serves the same tokens: copy the first node's file.
	raw, err := os.ReadFile(filepath.Join(dirA, "data", "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dirB, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, "data", "tokens.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cmdB, addrB, tokenB := startBrain(t, dirB, "--nats", urls[1], "--node-id", "b", "--lease-ttl", ttl)
	if tokenB != token {
		t.Fatal("node b did not take the copied tokens")
	}

	owner := dialPeer(t, ctx, addrA, token, "k", "") // placement: node a, which the first connection reached
	owner.until(protocol.TypeSnapshot)
	p := dialPeer(t, ctx, addrB, token, "k", "?after=0") // forwarded to node a
	show := protocol.Capability{Name: "ui.show", Description: "Show something.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}, Audience: []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}}
	p.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{approvalCap("ui.confirm"), show}})
	for f := p.next(); f.Ref != "r"; f = p.next() {
	}
	p.send("u1", &protocol.CapabilityInvoke{Name: "ui.confirm", Input: json.RawMessage(`{"what":"ship it"}`)})
	req := p.until(protocol.TypeApprovalRequested).Msg.(*protocol.ApprovalRequested)
	p.send("u2", &protocol.CapabilityInvoke{Name: "ui.show", Input: json.RawMessage(`{}`)})
	inv := p.until(protocol.TypeCapabilityInvoked)
	showCall, lastSeen := inv.Msg.(*protocol.CapabilityInvoked).CallID, inv.Seq

	if err := cmdA.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmdA.Wait()
	killed := time.Now()
	p2 := dialRetry(t, ctx, addrB, token, "k", fmt.Sprintf("?after=%d", lastSeen), 20*time.Second)
	t.Logf("resumed on node b %s after SIGKILL (lease TTL %s)", time.Since(killed).Round(10*time.Millisecond), ttl)
	p2.send("a", &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: req.InputDigest})
	p2.send("x", &protocol.CapabilityResult{CallID: showCall, Result: json.RawMessage(`"shown"`)})
	seq := lastSeen
	outcomes := map[string]string{}
	for len(outcomes) < 2 {
		f := p2.next()
		if f.Ref != "" {
			if f.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("reply %s on node b: %+v", f.Ref, f.Msg)
			}
			continue
		}
		if f.Seq != seq+1 {
			t.Fatalf("after failover got seq %d (%s), want %d: a gap or a duplicate", f.Seq, f.Msg.MessageType(), seq+1)
		}
		seq = f.Seq
		switch m := f.Msg.(type) {
		case *protocol.CapabilityInvoked:
			if m.CallID == req.CallID {
				p2.send("x2", &protocol.CapabilityResult{CallID: m.CallID, Result: json.RawMessage(`"shipped"`)})
			}
		case *protocol.CapabilityOutcome:
			if _, dup := outcomes[m.CallID]; dup {
				t.Fatalf("call %s ended twice", m.CallID)
			}
			outcomes[m.CallID] = string(m.Outcome.Value)
		}
	}
	if outcomes[req.CallID] != `"shipped"` || outcomes[showCall] != `"shown"` {
		t.Fatalf("outcomes = %v", outcomes)
	}

	// Graceful: node a comes back; SIGTERM on node b hands the session over
	// at once, without waiting for the lease TTL.
	_, addrA2, _ := startBrain(t, dirA, "--nats", urls[2], "--node-id", "a", "--lease-ttl", ttl)
	if err := cmdB.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for {
		if _, _, err := p2.conn.Read(ctx); err != nil {
			break
		}
	}
	p3 := dialRetry(t, ctx, addrA2, token, "k", fmt.Sprintf("?after=%d", seq), 10*time.Second)
	if took := time.Since(stopped); took > 2*time.Second {
		t.Fatalf("graceful handover took %s (lease TTL %s): it waited for expiry", took, ttl)
	}
	p3.send("r2", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{show}})
	for f := p3.next(); f.Ref != "r2"; f = p3.next() {
		if f.Ref == "" && f.Seq != 0 {
			if f.Seq != seq+1 {
				t.Fatalf("after handover got seq %d (%s), want %d", f.Seq, f.Msg.MessageType(), seq+1)
			}
			seq = f.Seq
		}
	}
}
