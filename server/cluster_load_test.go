package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/natstest"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// loadCall is one finished call of the load test.
type loadCall struct {
	sent, done time.Time
}

// loadWorker drives one session: calls agent- and client-side capabilities
// in turn, follows the session to another node when its node dies, and
// checks every frame's seq follows the last.
type loadWorker struct {
	sid     string
	nodes   []*node
	cur     int
	conn    *websocket.Conn
	lastSeq uint64

	acked  map[string]bool // calls started: acknowledged, or seen invoked in the event log
	ended  map[string]bool // calls whose outcome was delivered
	byReq  map[string]string
	answer map[string]bool // client-side calls this peer answered
	calls  []loadCall
	warm   atomic.Bool // it has finished a call (the kill waits for every session to)
	moves  int
	resent int
	// movedAt is when the session first moved; afterMove counts the calls
	// finished since.
	movedAt   time.Time
	afterMove int
	resumedAt time.Time // when the first call after the move finished
	trace     []string  // the latest of what the worker saw, for a failure's report
}

// firstConnect bounds a load worker's first connect (see run).
const firstConnect = 30 * time.Second

// traceLines bounds a worker's trace.
const traceLines = 300

// tracef records one line of the worker's history.
func (w *loadWorker) tracef(format string, args ...any) {
	if len(w.trace) >= traceLines {
		w.trace = slices.Delete(w.trace, 0, traceLines/3)
	}
	w.trace = append(w.trace, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// memLog keeps log lines in memory, bounded, for a failure's report.
type memLog struct {
	mu    sync.Mutex
	lines []string
	attrs []slog.Attr
	root  *memLog
}

func (h *memLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *memLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.Time.Format("15:04:05.000"), r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s", a); return true })
	root := h
	if h.root != nil {
		root = h.root
	}
	root.mu.Lock()
	defer root.mu.Unlock()
	if len(root.lines) < 200000 {
		root.lines = append(root.lines, b.String())
	}
	return nil
}

func (h *memLog) WithAttrs(as []slog.Attr) slog.Handler {
	root := h
	if h.root != nil {
		root = h.root
	}
	return &memLog{root: root, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h *memLog) WithGroup(string) slog.Handler { return h }

func (h *memLog) grep(s string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// dial connects to the session through w.nodes[w.cur], trying the next
// node when one is gone, for at most within; each attempt is given at most
// attempt (a node that neither answers nor refuses is left for the next).
func (w *loadWorker) dial(ctx context.Context, query string, within, attempt time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		n := w.nodes[w.cur]
		dctx, cancel := context.WithTimeout(ctx, min(attempt, time.Until(deadline)+time.Millisecond))
		conn, resp, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(n.url, "http")+"/v1/sessions/"+w.sid+"/ws"+query,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + clientToken}}})
		cancel()
		if err == nil {
			conn.SetReadLimit(8 << 20)
			w.conn = conn
			w.tracef("connected via %s%s", n.id, query)
			return nil
		}
		w.tracef("dial %s%s: %v", n.id, query, err)
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s: dial %s: %w", w.sid, n.id, err)
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			w.cur = (w.cur + 1) % len(w.nodes) // that node is gone: any other will do
		}
		time.Sleep(50 * time.Millisecond) // a client's retry delay
	}
}

func (w *loadWorker) send(ctx context.Context, id string, m protocol.Message) error {
	b, err := protocol.EncodeFrame(&protocol.Frame{ID: id, Msg: m})
	if err != nil {
		return err
	}
	return w.conn.Write(ctx, websocket.MessageText, b)
}

// reconnect follows the session after its connection broke.
func (w *loadWorker) reconnect(ctx context.Context) error {
	w.conn.CloseNow()
	if w.moves == 0 {
		w.movedAt = time.Now()
	}
	w.moves++
	if err := w.dial(ctx, fmt.Sprintf("?after=%d", w.lastSeq), 20*time.Second, 5*time.Second); err != nil {
		return err
	}
	// A result sent just before the node died may never have been
	// journaled: answer again every call still open (a duplicate result is
	// refused, harmlessly).
	for c := range w.answer {
		if !w.ended[c] {
			_ = w.send(ctx, "res-"+c, &protocol.CapabilityResult{CallID: c, Result: json.RawMessage(`{"n":1}`)})
		}
	}
	return nil
}

// run makes calls until stopAt (unix nanoseconds; 0 while unknown) has
// passed, at most maxCalls; the first connection (to nodes[cur]) places
// the session there.
func (w *loadWorker) run(ctx context.Context, maxCalls int, stopAt *atomic.Int64, echo protocol.Capability, finished *atomic.Int64) error {
	// The first connect opens the session — a lease and the session
	// stream's first writes through a three-node raft, 20-100 at once —
	// which beside another go test -race took more than two 5 s attempts.
	// The test is about the failover, not the opening: the first connect
	// may take the whole of a run's start (the kill waits for it), in one
	// attempt, since a retry only adds an open to the queue.
	if err := w.dial(ctx, "", firstConnect, firstConnect); err != nil {
		return err
	}
	defer func() { w.conn.CloseNow() }()
	registered := false
	stopped := func() bool { at := stopAt.Load(); return at != 0 && time.Now().UnixNano() > at }
	for k := 0; k < maxCalls && !stopped(); {
		if !registered {
			if err := w.send(ctx, "reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{echo}}); err != nil {
				if err := w.reconnect(ctx); err != nil {
					return err
				}
				continue
			}
			registered = true
		}
		req := fmt.Sprintf("%s-%d-%d", w.sid, k, w.resent)
		name := "env.echo"
		if k%2 == 1 {
			name = "ui.echo"
		}
		sent := time.Now()
		w.tracef("invoke %s %s", req, name)
		if err := w.send(ctx, req, &protocol.CapabilityInvoke{Name: name, Input: json.RawMessage(`{"n":1}`)}); err != nil {
			if err := w.reconnect(ctx); err != nil {
				return err
			}
			registered = false
			continue
		}
		ok, err := w.await(ctx, req)
		if err != nil {
			return err
		}
		if !ok { // the connection broke before the kernel acknowledged it: send again
			w.resent++
			registered = false
			continue
		}
		w.calls = append(w.calls, loadCall{sent: sent, done: time.Now()})
		if w.moves > 0 {
			if w.afterMove == 0 {
				w.resumedAt = time.Now()
			}
			w.afterMove++
		}
		finished.Add(1)
		w.warm.Store(true)
		k++
	}
	// Every acknowledged call must have ended; wait for stragglers.
	for until := time.Now().Add(10 * time.Second); time.Now().Before(until) && w.open() > 0; {
		if _, err := w.await(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

func (w *loadWorker) open() int {
	n := 0
	for c := range w.acked {
		if !w.ended[c] {
			n++
		}
	}
	return n
}

// await reads frames until req's call has ended (true), or the
// connection broke before req was acknowledged (false, reconnected).
func (w *loadWorker) await(ctx context.Context, req string) (bool, error) {
	for {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, b, err := w.conn.Read(rctx)
		cancel()
		if err != nil {
			w.tracef("read: %v", err)
			if ctx.Err() != nil {
				var open []string
				for c := range w.acked {
					if !w.ended[c] {
						open = append(open, c)
					}
				}
				return false, fmt.Errorf("session %s on %s: waiting for %s (call %q), after seq %d, open calls %v, answered %v: %w",
					w.sid, w.nodes[w.cur].id, req, w.byReq[req], w.lastSeq, open, w.answer, ctx.Err())
			}
			acked := w.byReq[req] != ""
			if err := w.reconnect(ctx); err != nil {
				return false, err
			}
			if !acked {
				return false, nil
			}
			continue
		}
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			return false, err
		}
		w.tracef("frame seq %d ref %q %.160s", f.Seq, f.Ref, b)
		if typ := f.Msg.MessageType(); f.Ref != "" || typ == protocol.TypeAck || typ == protocol.TypeError {
			if a, ok := f.Msg.(*protocol.Ack); ok && a.CallID != "" {
				w.acked[a.CallID] = true
				w.byReq[f.Ref] = a.CallID
			}
		} else if f.Seq != 0 {
			if snap, ok := f.Msg.(*protocol.Snapshot); ok {
				w.lastSeq = f.Seq
				// A snapshot stands for the events it replaces: a call
				// dispatched to this client in them is answered from it.
				for _, pc := range snap.PendingCalls {
					if pc.Name == "ui.echo" && pc.State == protocol.CallRunning && !w.ended[pc.CallID] {
						w.acked[pc.CallID] = true
						w.answer[pc.CallID] = true
						_ = w.send(ctx, "res-"+pc.CallID, &protocol.CapabilityResult{CallID: pc.CallID, Result: json.RawMessage(`{"n":1}`)})
					}
				}
				continue
			}
			if f.Seq != w.lastSeq+1 {
				return false, fmt.Errorf("session %s: seq %d (%s) after %d: a gap or a duplicate", w.sid, f.Seq, f.Msg.MessageType(), w.lastSeq)
			}
			w.lastSeq = f.Seq
			switch m := f.Msg.(type) {
			case *protocol.CapabilityInvoked:
				w.acked[m.CallID] = true // started, even if its ack was lost with a node
				if m.Name == "ui.echo" {
					w.answer[m.CallID] = true
					_ = w.send(ctx, "res-"+m.CallID, &protocol.CapabilityResult{CallID: m.CallID, Result: json.RawMessage(`{"n":1}`)})
				}
			case *protocol.CapabilityOutcome:
				if w.ended[m.CallID] {
					return false, fmt.Errorf("session %s: call %s ended twice", w.sid, m.CallID)
				}
				w.ended[m.CallID] = true
			}
		}
		if req == "" {
			return true, nil
		}
		if c := w.byReq[req]; c != "" && w.ended[c] {
			return true, nil
		}
	}
}

// TestClusterLoad: 100 sessions (20 under the race detector) spread over
// three nodes, agent- and client-side calls in turn, one node killed
// mid-run; the sessions keep calling for a while after the failover.
// Every call the kernel started ends exactly once, seqs stay gap-free,
// every session that moved makes calls on its new node, and throughput
// and p99 latency are reported before, during and after the failover.
//
// The kill is in process (node.kill): the node's listener, every
// connection and its NATS connection close at once, as a SIGKILL's would,
// while its sessions stay in memory — stricter than a dead process, since
// they go on trying to write and must be fenced. TestServeClusterSIGKILL
// (cmd/brain) kills a real process.
func TestClusterLoad(t *testing.T) {
	sessions := 100
	if testutil.RaceEnabled {
		sessions = 20 // the race detector slows the kernel about tenfold
	}
	const (
		maxCalls = 5000            // per session: a bound, never reached in the time given
		before   = 2 * time.Second // of calls before the kill
		// The lease TTL: longer than TestClusterNodes' 1 s, since a
		// renewal must finish within a fifth of it plus the third it
		// renews early — at 1 s a contended 2-core run lost leases by the
		// dozen (every call still accounted for, but 95 of 100 sessions
		// moving and a p99 of 5.6 s).
		ttl    = 3 * time.Second
		during = ttl + time.Second // the failover: the TTL, then the restores
		after  = 3 * time.Second   // of calls after it
	)
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	urls := natstest.StartCluster(t, 3)
	tool := protocol.Capability{Name: "env.echo", Description: "Echo.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}, Audience: []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}}
	attach := func(s *session.Session) error {
		return s.RegisterAgent(tool, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil }))
	}
	logs := &memLog{}
	log := slog.New(logs)
	nodes := []*node{startNodeLog(t, "node1", urls[0], tokens, attach, log, ttl), startNodeLog(t, "node2", urls[1], tokens, attach, log, ttl), startNodeLog(t, "node3", urls[2], tokens, attach, log, ttl)}
	echo := clientCap("ui.echo", false)
	echo.Audience = []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}

	ctx, cancel := context.WithTimeout(context.Background(), firstConnect+45*time.Second)
	defer cancel()
	var finished, failed, stopAt atomic.Int64
	workers := make([]*loadWorker, sessions)
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		w := &loadWorker{sid: fmt.Sprintf("load-%d", i), nodes: nodes, cur: i % 3,
			acked: map[string]bool{}, ended: map[string]bool{}, byReq: map[string]string{}, answer: map[string]bool{}}
		workers[i] = w
		wg.Go(func() {
			err := w.run(ctx, maxCalls, &stopAt, echo, &finished)
			if err != nil {
				failed.Add(1)
				err = fmt.Errorf("%w\n  %s", err, strings.Join(w.trace, "\n  "))
			}
			errs <- err
		})
	}
	// Kill node1 after the first phase (sooner if a session failed), and
	// not before every session has finished a call: on a loaded machine
	// the connects alone can take longer than the phase, and a session
	// that has made no call by the kill proves nothing about a failover.
	select {
	case <-time.After(before):
	case <-ctx.Done():
	}
	tick := time.NewTicker(10 * time.Millisecond)
	for ; ctx.Err() == nil && failed.Load() == 0; <-tick.C {
		if !slices.ContainsFunc(workers, func(w *loadWorker) bool { return !w.warm.Load() }) {
			break
		}
	}
	tick.Stop()
	killedAt := time.Now()
	recovered := killedAt.Add(during)
	stopAt.Store(recovered.Add(after).UnixNano())
	nodes[0].kill()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		for _, w := range workers {
			if w.open() == 0 {
				continue
			}
			evs, err := nodes[1].st.Load(context.Background(), w.sid)
			t.Logf("session %s: journal (%v):", w.sid, err)
			for _, e := range evs {
				b, _ := json.Marshal(e.Msg)
				t.Logf("  %d %s %.200s", e.Seq, e.Msg.MessageType(), b)
			}
			for _, l := range logs.grep(w.sid) {
				t.Log("  log:", l)
			}
		}
		return
	}
	end := time.Now()
	var all []loadCall
	acked, ended, moves, resent, moved := 0, 0, 0, 0, 0
	movedLive := 0
	var outage time.Duration // the longest from the kill to a moved session's next finished call
	for i, w := range workers {
		all = append(all, w.calls...)
		acked += len(w.acked)
		ended += len(w.ended)
		moves += w.moves
		resent += w.resent
		if n := w.open(); n > 0 {
			t.Errorf("session %s: %d started calls never ended", w.sid, n)
		}
		if w.moves > 0 {
			moved++
			if i%3 != 0 {
				movedLive++ // not on the killed node: a lease or an append failed under load
			}
			// One that moved in the failover must go on on its new node
			// (a session can also move later, if an append or a renewal
			// failed under load: maybe too late for another call).
			if w.movedAt.Before(recovered) && w.afterMove == 0 {
				t.Errorf("session %s moved at %s and made no call after", w.sid, w.movedAt.Sub(killedAt).Round(time.Millisecond))
			}
			if w.afterMove > 0 && w.movedAt.Before(recovered) {
				outage = max(outage, w.resumedAt.Sub(killedAt))
			}
		}
	}
	windows := []struct {
		name     string
		from, to time.Time
	}{{"before", start, killedAt}, {"during", killedAt, recovered}, {"after", recovered, end}}
	for _, win := range windows {
		var lat []time.Duration
		for _, c := range all {
			if !c.done.Before(win.from) && c.done.Before(win.to) {
				lat = append(lat, c.done.Sub(c.sent))
			}
		}
		if len(lat) == 0 {
			t.Errorf("%s the failover: no call finished", win.name)
			continue
		}
		slices.Sort(lat)
		p99 := lat[min(len(lat)-1, len(lat)*99/100)]
		t.Logf("%-6s the failover: %5d calls in %6s: %6.0f calls/s, p50 %s, p99 %s, max %s", win.name, len(lat), win.to.Sub(win.from).Round(time.Millisecond),
			float64(len(lat))/win.to.Sub(win.from).Seconds(), lat[len(lat)/2].Round(10*time.Microsecond), p99.Round(10*time.Microsecond), lat[len(lat)-1].Round(time.Millisecond))
	}
	t.Logf("the moved sessions finished a call again at most %s after the kill (lease TTL %s)", outage.Round(time.Millisecond), ttl)
	t.Logf("%d sessions (%d moved, %d of them from a live node), %d calls finished, %d started, %d outcomes delivered, %d reconnections, %d invokes sent again (unacknowledged when the node died)",
		sessions, moved, movedLive, len(all), acked, ended, moves, resent)
	if acked != ended {
		t.Fatalf("%d calls started, %d outcomes delivered", acked, ended)
	}
	if moved == 0 {
		t.Fatal("no session moved: the node was not killed mid-run")
	}
	if finished.Load() != int64(len(all)) {
		t.Fatalf("%d calls counted finished, %d recorded", finished.Load(), len(all))
	}
}
