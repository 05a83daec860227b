package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/natstest"
	"github.com/brainrt/brain/protocol"
)

// TestServeClusterFaults runs three nats-server processes (a JetStream
// cluster, R3) and three `brain serve --nats --node-id` processes with the
// default lease TTL, and proves, in turn on the same cluster:
//
//  1. SIGTERM of a node owning 30 sessions, each with an approval
//     pending: it exits within its bound, every peer is told why (1001),
//     every lease is released before it exits, the stop writes no event,
//     and the approvals are pending on the next owner and complete there;
//  2. a stop and restart of every node changes no session's log (the
//     same last seq) and leaves the approvals pending, and they complete;
//  3. an MCP client connected to a node that does not own its session
//     calls a tool of the session's environment steadily while the owner
//     stops (SIGTERM): no call fails, every result arrives, the log holds
//     exactly one outcome per call (mcpHandover);
//  4. SIGKILL of the nats-server leading the lease bucket (and the
//     events stream) while calls run: the election loses no lease, no
//     call fails, no connection drops; the test reports the election and
//     the longest call;
//  5. SIGKILL of a nats-server leading neither: calls go on; then of a
//     second, two of three gone: within 2 s every node says
//     precisely that its store has no quorum (a new session's request is
//     503 with it, /readyz too, /metrics shows it), a call that needs the
//     store closes its connection with 1013 and that reason; once the
//     servers are back every node is ready again and nothing acknowledged
//     is lost.
func TestServeClusterFaults(t *testing.T) {
	pc := natstest.StartProcCluster(t, 3)
	if err := pc.WaitJetStream(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	nodes := startBrainNodes(t, pc.URL(), []string{"a", "b", "c"}, "--shutdown-timeout", "5s")
	a, b, c := nodes[0], nodes[1], nodes[2]
	token := tokenOf(t, filepath.Join(a.dir, "data"), "client")
	operator := tokenOf(t, filepath.Join(a.dir, "data"), "operator")
	for _, n := range nodes {
		waitReady(t, ctx, n, time.Minute)
	}

	const sessions = 30
	ids := make([]string, sessions)
	digests := map[string]string{} // session → its pending approval's input digest
	calls := map[string]string{}   // session → its pending approval's call id
	seqs := map[string]uint64{}    // session → its last seq before the stop
	for i := range ids {
		ids[i] = fmt.Sprintf("ap-%d", i)
	}

	t.Run("SIGTERM of an owner with 30 pending approvals", func(t *testing.T) {
		peers := make([]*wsClient, sessions)
		for i, id := range ids {
			p, err := dialClient(ctx, a.addr, token, id, "", 10*time.Second) // placement: node a
			if err != nil {
				t.Fatal(err)
			}
			defer p.conn.CloseNow()
			if _, err := p.until(ctx, func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeSnapshot }); err != nil {
				t.Fatal(err)
			}
			if err := p.register(ctx, approvalCap("ui.confirm")); err != nil {
				t.Fatal(err)
			}
			if err := p.send(ctx, "u", &protocol.CapabilityInvoke{Name: "ui.confirm", Input: json.RawMessage(`{"what":"ship ` + id + `"}`)}); err != nil {
				t.Fatal(err)
			}
			f, err := p.until(ctx, func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeApprovalRequested })
			if err != nil {
				t.Fatal(err)
			}
			req := f.Msg.(*protocol.ApprovalRequested)
			calls[id], digests[id] = req.CallID, req.InputDigest
			peers[i] = p
		}
		for _, id := range ids {
			seqs[id], _ = a.sessionRow(ctx, token, id, 10*time.Second)
		}
		if held := heldLeases(t, ctx, pc.URL(), ids); len(held) != sessions || held[ids[0]] != "a" {
			t.Fatalf("before the stop %d of %d leases are held (by %v)", len(held), sessions, held)
		}

		took := a.term(30 * time.Second)
		t.Logf("node a stopped in %s with %d sessions", took.Round(time.Millisecond), sessions)
		for i, p := range peers {
			code, reason, err := p.closeStatus(ctx)
			if err != nil || code != websocket.StatusGoingAway {
				t.Fatalf("session %s: the peer's connection closed with %d %q %v, want 1001", ids[i], code, reason, err)
			}
		}
		// Every lease was released before the node exited: none is held.
		if held := heldLeases(t, ctx, pc.URL(), ids); len(held) != 0 {
			t.Fatalf("after the stop %d leases are still held: %v", len(held), held)
		}
		if log := a.log(); strings.Contains(log, "release lease") || strings.Contains(log, "connection closed") {
			t.Fatalf("node a's stop failed to release leases:\n%s", grepLines(log, "lease"))
		}
		// The next owner (b, through which they are read) restores each
		// session as the store holds it: the stop wrote nothing, the
		// restore writes nothing, the approval is pending.
		for _, id := range ids {
			seq, pending := b.sessionRow(ctx, token, id, 20*time.Second)
			if seq != seqs[id] {
				t.Fatalf("session %s: seq %d after the stop, %d before: the stop or the restore wrote %d events", id, seq, seqs[id], seq-seqs[id])
			}
			if len(pending) != 1 || pending[0].CallID != calls[id] || pending[0].State != protocol.CallAwaitingApproval {
				t.Fatalf("session %s: pending %+v, want %s awaiting approval", id, pending, calls[id])
			}
		}
		// A third of them are decided now, through node c (forwarded to
		// their owner) and complete.
		for _, id := range ids[:10] {
			seqs[id] = decide(t, ctx, c, token, id, calls[id], digests[id], seqs[id])
		}
	})

	t.Run("a stop and restart of every node changes no log", func(t *testing.T) {
		a.start()
		for _, id := range ids {
			seqs[id], _ = b.sessionRow(ctx, token, id, 20*time.Second)
		}
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() { n.term(30 * time.Second) })
		}
		wg.Wait()
		if held := heldLeases(t, ctx, pc.URL(), ids); len(held) != 0 {
			t.Fatalf("after every node stopped %d leases are still held: %v", len(held), held)
		}
		for _, n := range nodes {
			n.start()
		}
		for i, id := range ids {
			seq, pending := nodes[i%3].sessionRow(ctx, token, id, 20*time.Second)
			if seq != seqs[id] {
				t.Fatalf("session %s: seq %d after the restart, %d before", id, seq, seqs[id])
			}
			want := 0
			if i >= 10 {
				want = 1
			}
			if len(pending) != want {
				t.Fatalf("session %s: %d pending calls after the restart, want %d: %+v", id, len(pending), want, pending)
			}
		}
		for i, id := range ids[10:] {
			seqs[id] = decide(t, ctx, nodes[i%3], token, id, calls[id], digests[id], seqs[id])
		}
	})

	t.Run("MCP calls through another node while the owner stops", func(t *testing.T) {
		model := tokenOf(t, filepath.Join(a.dir, "data"), "model")
		calls, longest := mcpHandover(t, ctx, pc.URL(), b, c, model, token)
		t.Logf("the MCP handover: %d calls, 0 failed, the longest %s", calls, longest.Round(time.Millisecond))
	})

	// Traffic: a client per session making calls of a client-side
	// capability one after another, through a node each (most of them
	// forwarded to the session's owner).
	const callers = 6
	type result struct {
		calls   int
		longest time.Duration
		err     error
	}
	var progress atomic.Int64 // calls that ended well, every caller's
	// waitProgress waits until n more calls have ended well, for up to a
	// minute.
	waitProgress := func(n int64) {
		want, deadline := progress.Load()+n, time.Now().Add(time.Minute)
		for progress.Load() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling a count, for at most a minute
		}
	}
	// runTraffic starts a caller per client and returns end, which stops
	// them, waits for every one (none is left calling into the next
	// step, even when this one fails) and returns their calls, the
	// longest and the first error. end may be called more than once.
	runTraffic := func(clients []*wsClient) (end func() result) {
		stop, out := make(chan struct{}), make(chan result, len(clients))
		for i, cl := range clients {
			go func() {
				var r result
				for k := 0; ; k++ {
					select {
					case <-stop:
						out <- r
						return
					default:
					}
					start := time.Now()
					if err := cl.call(ctx, fmt.Sprintf("c%d-%d", i, k)); err != nil {
						r.err = fmt.Errorf("session tr-%d, call %d after %s: %w", i, k, time.Since(start).Round(time.Millisecond), err)
						out <- r
						return
					}
					r.calls++
					r.longest = max(r.longest, time.Since(start))
					progress.Add(1)
				}
			}()
		}
		return sync.OnceValue(func() result {
			close(stop)
			var all result
			for range clients {
				r := <-out
				all.calls += r.calls
				all.longest = max(all.longest, r.longest)
				if all.err == nil {
					all.err = r.err
				}
			}
			return all
		})
	}
	clients := make([]*wsClient, callers)
	for i := range clients {
		cl, err := dialClient(ctx, nodes[i%3].addr, token, fmt.Sprintf("tr-%d", i), "?after=0", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.conn.CloseNow()
		if err := cl.register(ctx, echoCap); err != nil {
			t.Fatal(err)
		}
		// Through another node: the forwarded path.
		if i%2 == 1 {
			cl.conn.CloseNow()
			seq := cl.seq
			if cl, err = dialClient(ctx, nodes[(i+1)%3].addr, token, fmt.Sprintf("tr-%d", i), fmt.Sprintf("?after=%d", seq), 20*time.Second); err != nil {
				t.Fatal(err)
			}
			defer cl.conn.CloseNow()
			cl.seq = seq // resumed: the next event follows it
		}
		clients[i] = cl
	}

	t.Run("SIGKILL of the NATS server leading the lease bucket", func(t *testing.T) {
		leader, err := pc.StreamLeader(ctx, "KV_brain_session_leases")
		if err != nil {
			t.Fatal(err)
		}
		// The killed server leads the events stream too: the journal's
		// appends wait out the same election.
		if err := pc.MoveLeader(ctx, "BRAIN_EVENTS", leader, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		logsBefore := make([]int, len(nodes))
		for i, n := range nodes {
			logsBefore[i] = len(n.log())
		}
		end := runTraffic(clients)
		defer end()
		time.Sleep(time.Second) // calls running before the kill: the behaviour under test is traffic through it
		pc.Server(leader).Kill()
		killed := time.Now()
		var elected time.Duration
		for elected == 0 {
			if l, err := pc.StreamLeader(ctx, "KV_brain_session_leases"); err == nil && l != leader {
				elected = time.Since(killed)
			} else if time.Since(killed) > 30*time.Second {
				t.Fatalf("no new leader of the lease bucket %s after the kill", time.Since(killed))
			}
			time.Sleep(50 * time.Millisecond) // polling an election
		}
		// Calls go on until 17 s after the kill, past the validity (16 s
		// of the 20 s TTL) of any lease not renewed since before it: a
		// lease that did not ride the election out is lost by then, and
		// its session's connection with it.
		time.Sleep(time.Until(killed.Add(17 * time.Second))) // traffic through a lease's validity: the behaviour under test is its passage
		r := end()
		if r.err != nil {
			t.Fatal(r.err)
		}
		total, longest := r.calls, r.longest
		for i, n := range nodes {
			if l := n.log()[logsBefore[i]:]; strings.Contains(l, "lease lost") || strings.Contains(l, "handing the session over") {
				t.Fatalf("node %s lost a lease or handed a session over:\n%s", n.id, grepLines(l, "lease"))
			}
		}
		t.Logf("SIGKILL of %s, leading the lease bucket and the events stream: a new leader after %s; %d calls, none failed, no lease lost, no connection dropped; the longest call %s",
			leader, elected.Round(time.Millisecond), total, longest.Round(time.Millisecond))
		if err := pc.Server(leader).Start(); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			waitReady(t, ctx, n, time.Minute)
		}
	})

	t.Run("quorum loss is said precisely, and nothing is lost", func(t *testing.T) {
		const want = "the session store has no quorum: 1 of 3 NATS servers reachable"
		// First a server that leads neither the lease bucket nor the events
		// stream: nothing is visible but a call in flight on a connection
		// to it, sent again.
		leases, err := pc.StreamLeader(ctx, "KV_brain_session_leases")
		if err != nil {
			t.Fatal(err)
		}
		events, err := pc.StreamLeader(ctx, "BRAIN_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		var order []*natstest.Server // the follower first, the survivor last
		for _, s := range pc.Servers {
			if s.Name != leases && s.Name != events {
				order = append([]*natstest.Server{s}, order...)
			} else {
				order = append(order, s)
			}
		}
		end := runTraffic(clients)
		defer end()
		waitProgress(2 * callers) // calls running before the kill
		order[0].Kill()
		waitProgress(50 * callers) // and after it (a connection to the killed server reconnects)
		r := end()
		if r.err != nil {
			t.Fatalf("with one NATS server of three gone: %v", r.err)
		}
		total, longest := r.calls, r.longest
		t.Logf("SIGKILL of %s, leading neither the lease bucket (%s) nor the events stream (%s): %d calls, none failed, the longest %s",
			order[0].Name, leases, events, total, longest.Round(time.Millisecond))

		// Then a second: the survivor has no quorum.
		survivor := order[2]
		order[1].Kill()
		killed := time.Now()
		// Every node says it, within 2 s of the kill (the bound asked of
		// it: a probe every 500 ms, a write that fails at once or within
		// 800 ms, and the servers' refused connections): a new session's
		// request is 503 with it, and so is /readyz.
		var wg sync.WaitGroup
		told := make([]time.Duration, len(nodes))
		errs := make([]error, len(nodes))
		for i, n := range nodes {
			wg.Go(func() {
				for k := 0; ; k++ {
					// A new session's request (not a /ws GET, which is
					// refused before the store is asked unless a handshake).
					code, body, hdr, err := n.request(ctx, "POST", "/v1/sessions", token, fmt.Sprintf(`{"id":"fresh-%s-%d"}`, n.id, k))
					var e struct{ Code, Message string }
					if err == nil && code == http.StatusServiceUnavailable && json.Unmarshal(body, &e) == nil && e.Message == want && hdr.Get("Retry-After") != "" {
						told[i] = time.Since(killed)
						return
					}
					if time.Since(killed) > 10*time.Second {
						errs[i] = fmt.Errorf("node %s: a new session's request is %d %s %v", n.id, code, body, err)
						return
					}
					time.Sleep(50 * time.Millisecond) // polling a node's view of its store
				}
			})
		}
		wg.Wait()
		for i, n := range nodes {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if told[i] > 2*time.Second {
				t.Fatalf("node %s said it %s after the kill, more than 2 s", n.id, told[i].Round(time.Millisecond))
			}
			if code, body, _, _ := n.get(ctx, "/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(string(body), want) {
				t.Fatalf("node %s: /readyz %d %s", n.id, code, body)
			}
			if code, body, _, _ := n.get(ctx, "/metrics", operator); code != 200 || !strings.Contains(string(body), `brain_store_ready{state="no_quorum"} 0`) {
				t.Fatalf("node %s: /metrics %d lacks brain_store_ready{state=\"no_quorum\"} 0", n.id, code)
			}
		}
		t.Logf("every node said %q within %s of the kill", want, slices.Max(told).Round(time.Millisecond))
		// A call needs the store: the session's connection closes with
		// 1013 and the reason.
		cl := clients[0]
		lastSeq := cl.seq
		_ = cl.send(ctx, "nq", &protocol.CapabilityInvoke{Name: "ui.echo", Input: json.RawMessage(`{}`)})
		code, reason, err := cl.closeStatus(ctx)
		if err != nil || code != websocket.StatusTryAgainLater || reason != want {
			t.Fatalf("a call without a quorum: the connection closed with %d %q %v, want 1013 %q", code, reason, err, want)
		}

		for _, s := range order[:2] {
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
		}
		back := time.Now()
		for _, n := range nodes {
			waitReady(t, ctx, n, time.Minute)
		}
		t.Logf("every node ready again %s after the servers came back (%s survived)", time.Since(back).Round(time.Millisecond), survivor.Name)
		// Nothing acknowledged is lost: the peer resumes after its last
		// seq, gap-free, and calls again; every approval session's log is
		// as it was.
		// The session may move once more, as a client is told (1012): the
		// call sent without a quorum was journaled after all — its append
		// timed out, yet the survivor, the streams' leader, stored it once
		// the quorum was back — so the first owner to write after it is
		// refused by fencing and hands the session over, and a resume
		// shows that call's event. A client reconnects after its last seq.
		seq := lastSeq
		for attempt := 1; ; attempt++ {
			cl, err = dialClient(ctx, nodes[1].addr, token, "tr-0", fmt.Sprintf("?after=%d", seq), 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.conn.CloseNow()
			cl.seq = seq
			err = cl.call(ctx, fmt.Sprintf("after-%d", attempt))
			var ce websocket.CloseError
			if err == nil {
				break
			}
			if !errors.As(err, &ce) || ce.Code != websocket.StatusServiceRestart || attempt == 3 {
				t.Fatalf("a call after the recovery (attempt %d, after seq %d): %v", attempt, seq, err)
			}
			t.Logf("a call after the recovery: the session moved (%d %q) after seq %d; resuming", ce.Code, ce.Reason, cl.seq)
			seq = cl.seq
		}
		for i, id := range ids {
			seq, pending := nodes[i%3].sessionRow(ctx, token, id, 30*time.Second)
			if seq != seqs[id] || len(pending) != 0 {
				t.Fatalf("session %s after the recovery: seq %d, %d pending; want %d, none", id, seq, len(pending), seqs[id])
			}
		}
	})
}

// decide approves session id's pending call through n, resuming after
// seq, answers the client-side call it starts, and returns the seq of its
// outcome once it completes.
func decide(t *testing.T, ctx context.Context, n *brainNode, token, id, callID, digest string, seq uint64) uint64 {
	t.Helper()
	p, err := dialClient(ctx, n.addr, token, id, fmt.Sprintf("?after=%d", seq), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.conn.CloseNow()
	p.seq = seq
	if err := p.send(ctx, "a", &protocol.CapabilityApprove{CallID: callID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: digest}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := p.next(ctx)
		if err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
		switch m := f.Msg.(type) {
		case *protocol.ErrorReply:
			t.Fatalf("session %s: the decision was refused: %s: %s", id, m.Code, m.Message)
		case *protocol.CapabilityInvoked:
			if m.CallID == callID {
				_ = p.send(ctx, "x", &protocol.CapabilityResult{CallID: callID, Result: json.RawMessage(`"shipped"`)})
			}
		case *protocol.CapabilityOutcome:
			if m.CallID == callID {
				if string(m.Outcome.Value) != `"shipped"` {
					t.Fatalf("session %s: the approved call ended %+v", id, m.Outcome)
				}
				return f.Seq
			}
		}
	}
}

// waitReady polls n's /readyz until it is 200, for up to within.
func waitReady(t *testing.T, ctx context.Context, n *brainNode, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body, _, err := n.get(ctx, "/readyz", "")
		if err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not ready after %s: %d %s %v", n.id, within, code, body, err)
		}
		time.Sleep(100 * time.Millisecond) // polling a node's view of its store
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
