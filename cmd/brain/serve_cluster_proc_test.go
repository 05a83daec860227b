package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/store"
)

// brainNode is one `brain serve --nats --node-id` process of a test
// cluster (the test binary as brain), which can be stopped, killed and
// started again on its data directory. Its stderr goes to brain.log in
// that directory, every run appended, and is shown when the test fails.
type brainNode struct {
	t    *testing.T
	id   string
	dir  string
	args []string
	cmd  *exec.Cmd
	addr string // host:port of the current run
}

// startBrainNodes starts `brain serve` nodes ids on the NATS servers url
// (every node given every URL, as a deployment would), sharing the first
// node's tokens file; extra flags go to every node.
func startBrainNodes(t *testing.T, url string, ids []string, extra ...string) []*brainNode {
	t.Helper()
	nodes := make([]*brainNode, len(ids))
	for i, id := range ids {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			raw, err := os.ReadFile(filepath.Join(nodes[0].dir, "data", "tokens.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "data", "tokens.json"), raw, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		n := &brainNode{t: t, id: id, dir: dir, args: append([]string{"--nats", url, "--node-id", id}, extra...)}
		n.start()
		nodes[i] = n
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.kill()
		}
		if t.Failed() {
			logs := make([]string, len(nodes))
			troubled := map[string]bool{} // sessions named by a warning or an error, any node's
			for i, n := range nodes {
				b, _ := os.ReadFile(filepath.Join(n.dir, "brain.log"))
				logs[i] = string(b)
				for l := range strings.SplitSeq(logs[i], "\n") {
					if !strings.Contains(l, "level=INFO") && !strings.Contains(l, "level=DEBUG") {
						if id := sessionOf(l); id != "" {
							troubled[id] = true
						}
					}
				}
			}
			for i, n := range nodes {
				// Its warnings and errors, every run's: a session moved or
				// a lease lost is there, not among thousands of finished
				// calls. And what happened to each session they name, on
				// every node, but for its finished calls: which node
				// loaded it when, and why it left.
				var lines, history []string
				for l := range strings.SplitSeq(logs[i], "\n") {
					switch {
					case strings.TrimSpace(l) == "":
					case !strings.Contains(l, "level=INFO") && !strings.Contains(l, "level=DEBUG"):
						lines = append(lines, l)
					case !strings.Contains(l, "call finished") && mentionsAny(l, troubled):
						history = append(history, l)
					}
				}
				t.Logf("node %s's log, its last %d lines that are not INFO:\n  %s", n.id, min(len(lines), 150), strings.Join(lines[max(0, len(lines)-150):], "\n  "))
				if len(history) > 0 {
					t.Logf("node %s's log, its last %d INFO lines of those sessions:\n  %s", n.id, min(len(history), 100), strings.Join(history[max(0, len(history)-100):], "\n  "))
				}
			}
		}
	})
	return nodes
}

// start runs the node (again), retrying while the NATS cluster cannot
// open its R3 stream yet (a node exits then), for up to a minute.
func (n *brainNode) start() {
	n.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := n.try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("node %s: %v", n.id, err)
		}
		time.Sleep(500 * time.Millisecond) // a cluster electing its leaders
	}
}

func (n *brainNode) try() error {
	logf, err := os.OpenFile(filepath.Join(n.dir, "brain.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0", "--data", "data", "--console-addr", "off"}, n.args...)...)
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "BRAIN_TEST_AS_BRAIN=1")
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	addr := ""
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "brain serve: listening on http://"); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return errors.New("brain serve did not start (see its brain.log)")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	n.cmd, n.addr = cmd, addr
	return nil
}

// term stops the node with SIGTERM and returns how long it took; it fails
// the test if the node does not exit cleanly within bound.
func (n *brainNode) term(bound time.Duration) time.Duration {
	n.t.Helper()
	start := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		n.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- n.cmd.Wait() }()
	select {
	case err := <-exited:
		n.cmd = nil
		if err != nil {
			n.t.Fatalf("node %s exited with %v after SIGTERM", n.id, err)
		}
	case <-time.After(bound):
		n.t.Fatalf("node %s still running %s after SIGTERM", n.id, bound)
	}
	return time.Since(start)
}

// kill SIGKILLs the node if it runs.
func (n *brainNode) kill() {
	if n.cmd != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

// log returns the node's log, every run.
func (n *brainNode) log() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "brain.log"))
	return string(b)
}

// get is GET path on the node with token ("" for none); it returns the
// status, the body and the response's headers.
func (n *brainNode) get(ctx context.Context, path, token string) (int, []byte, http.Header, error) {
	return n.request(ctx, "GET", path, token, "")
}

// request sends method path with token and body (none when "").
func (n *brainNode) request(ctx context.Context, method, path, token, body string) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.addr+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// sessionRow reads session id's last seq and pending calls through n,
// retrying 503 (a session moving, a store between leaders) for up to
// within.
func (n *brainNode) sessionRow(ctx context.Context, token, id string, within time.Duration) (uint64, []protocol.PendingCall) {
	n.t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, b, _, err := n.get(ctx, "/v1/sessions/"+id, token)
		if err == nil && code == http.StatusOK {
			var row struct {
				Seq          uint64
				PendingCalls []protocol.PendingCall
			}
			if err := json.Unmarshal(b, &row); err != nil {
				n.t.Fatalf("GET /v1/sessions/%s: %v", id, err)
			}
			return row.Seq, row.PendingCalls
		}
		if (err == nil && code != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			n.t.Fatalf("GET /v1/sessions/%s via %s: %d %s %v", id, n.id, code, b, err)
		}
		time.Sleep(100 * time.Millisecond) // a client's retry delay
	}
}

// heldLeases returns the holder of each session's lease that is held,
// read from the lease bucket with a store of its own.
func heldLeases(t *testing.T, ctx context.Context, url string, ids []string) map[string]string {
	t.Helper()
	st, err := store.Open(ctx, &store.Options{URL: url, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.Leases(ctx, &store.LeaseOptions{Node: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out := map[string]string{}
	for _, id := range ids {
		h, held, err := l.Holder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if held {
			out[id] = h.Node
		}
	}
	return out
}

// wsClient is a client-side WebSocket of one session that a test drives
// from a goroutine: its methods return errors instead of failing the test.
type wsClient struct {
	conn *websocket.Conn
	seq  uint64 // the last event seq read
}

// dialClient opens a client WebSocket to session id through addr,
// retrying 503 for up to within.
func dialClient(ctx context.Context, addr, token, id, query string, within time.Duration) (*wsClient, error) {
	deadline := time.Now().Add(within)
	for {
		// A handshake may wait while the node rides out a store between
		// leaders (up to 15 s, package store's rideOut).
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		conn, resp, err := websocket.Dial(dctx, "ws://"+addr+"/v1/sessions/"+id+"/ws"+query,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		cancel()
		if err == nil {
			conn.SetReadLimit(8 << 20)
			return &wsClient{conn: conn}, nil
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return nil, fmt.Errorf("dial session %s via %s: %w", id, addr, err)
		}
		time.Sleep(100 * time.Millisecond) // a client's retry delay
	}
}

func (c *wsClient) send(ctx context.Context, ref string, m protocol.Message) error {
	b, err := protocol.EncodeFrame(&protocol.Frame{ID: ref, Msg: m})
	if err != nil {
		return err
	}
	return c.conn.Write(ctx, websocket.MessageText, b)
}

// next reads a frame; an event's seq must follow the last one read (no
// gap, no duplicate; a snapshot sets it).
func (c *wsClient) next(ctx context.Context) (*protocol.Frame, error) {
	_, b, err := c.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	f, err := protocol.DecodeFrame(b)
	if err != nil {
		return nil, err
	}
	if f.Ref == "" && f.Seq != 0 {
		if _, snap := f.Msg.(*protocol.Snapshot); !snap && c.seq != 0 && f.Seq != c.seq+1 {
			return nil, fmt.Errorf("event seq %d (%s) after %d: a gap or a duplicate", f.Seq, f.Msg.MessageType(), c.seq)
		}
		c.seq = f.Seq
	}
	return f, nil
}

// until reads frames until match accepts one.
func (c *wsClient) until(ctx context.Context, match func(*protocol.Frame) bool) (*protocol.Frame, error) {
	for {
		f, err := c.next(ctx)
		if err != nil {
			return nil, err
		}
		if match(f) {
			return f, nil
		}
	}
}

// register registers caps and waits for the registration's ack.
func (c *wsClient) register(ctx context.Context, caps ...protocol.Capability) error {
	if err := c.send(ctx, "reg", &protocol.CapabilityRegister{Capabilities: caps}); err != nil {
		return err
	}
	f, err := c.until(ctx, func(f *protocol.Frame) bool { return f.Ref == "reg" })
	if err == nil {
		if e, ok := f.Msg.(*protocol.ErrorReply); ok {
			err = fmt.Errorf("register: %s: %s", e.Code, e.Message)
		}
	}
	return err
}

// echoCap is a client-side capability the test's clients answer.
var echoCap = protocol.Capability{Name: "ui.echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`),
	Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}, Audience: []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}}

// call invokes ui.echo as the user, answers its capability_invoked and
// returns once its outcome arrives, failing unless the outcome is the
// value sent.
func (c *wsClient) call(ctx context.Context, ref string) error {
	in := json.RawMessage(fmt.Sprintf(`{"ref":%q}`, ref))
	if err := c.send(ctx, ref, &protocol.CapabilityInvoke{Name: "ui.echo", Input: in}); err != nil {
		return err
	}
	callID := "" // from the ack, or from the capability_invoked of this input
	for {
		f, err := c.next(ctx)
		if err != nil {
			return err
		}
		switch m := f.Msg.(type) {
		case *protocol.Ack:
			if f.Ref == ref {
				callID = m.CallID
			}
		case *protocol.ErrorReply:
			if f.Ref == ref {
				return fmt.Errorf("invoke refused: %s: %s", m.Code, m.Message)
			}
		case *protocol.CapabilityInvoked:
			if m.Name == "ui.echo" && string(m.Input) == string(in) {
				callID = m.CallID
				if err := c.send(ctx, "res-"+ref, &protocol.CapabilityResult{CallID: m.CallID, Result: m.Input}); err != nil {
					return err
				}
			}
		case *protocol.CapabilityOutcome:
			if callID != "" && m.CallID == callID {
				if !m.Outcome.IsOK() || string(m.Outcome.Value) != string(in) {
					return fmt.Errorf("call %s ended %+v", callID, m.Outcome)
				}
				return nil
			}
		}
	}
}

// closeStatus reads c until its connection ends and returns its close
// code and reason; an end without a close frame is an error.
func (c *wsClient) closeStatus(ctx context.Context) (websocket.StatusCode, string, error) {
	for {
		_, _, err := c.conn.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			return 0, "", fmt.Errorf("the connection ended without a close frame (a bare 1006): %w", err)
		}
		return ce.Code, ce.Reason, nil
	}
}

// mentionsAny reports whether log line l names one of sessions.
func mentionsAny(l string, sessions map[string]bool) bool {
	id := sessionOf(l)
	return id != "" && sessions[id]
}

// sessionOf is the session a log line names (session=<id>), or "".
func sessionOf(l string) string {
	_, rest, _ := strings.Cut(l, " session=")
	if f := strings.Fields(rest); len(f) > 0 {
		return f[0]
	}
	return ""
}
