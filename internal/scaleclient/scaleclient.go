// Package scaleclient is the client side of brain's scale tests: many
// WebSocket clients of one kernel, each in a session of its own with a
// client capability registered, that answer every call made to it, and a
// paced load of round trips spread over all of them.
//
// It runs as a child process of the test that hosts the kernel, so that
// the kernel's process holds nothing of the clients (its memory per
// connected client is then what it costs): the test binary calls
// [RunIfRequested] first thing in TestMain, and the parent drives the
// child with [Start].
//
// The child reads commands from its stdin, one a line, and answers each
// with one line on its stdout:
//
//	connect N            → connected N        (N clients in all, each registered)
//	load RATE SECONDS    → result {JSON}      (a [Result])
//	close                → closed             (every connection closed; then it exits)
package scaleclient

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/protocol"
)

// envConfig names the environment variable that makes a test binary the
// clients' process: its value is the JSON of a [Config].
const envConfig = "BRAIN_SCALE_CLIENTS"

// Config is what the child needs to reach the kernel.
type Config struct {
	// Addr is the kernel's host:port.
	Addr string `json:"addr"`
	// Token is a client token; every session is created under it.
	Token string `json:"token"`
	// Prefix starts every session id (the client's number follows).
	Prefix string `json:"prefix"`
	// Dialers bounds the connections being opened at once. Default 32.
	Dialers int `json:"dialers"`
}

// Capability is the client capability every client registers: it echoes
// its input. Its audience includes "user", so that the client itself can
// invoke it (capability_invoke), which is how the load makes round trips.
var Capability = protocol.Capability{
	Name:          "ui.echo",
	Description:   "Echo the input (brain's scale test).",
	InputSchema:   json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
	Side:          protocol.SideClient,
	Origin:        protocol.Origin{Kind: protocol.OriginClient},
	Audience:      []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser},
	FireAndForget: false,
}

// RunIfRequested runs the clients' process and exits when the environment
// asks for it ([Start] does); otherwise it returns at once.
func RunIfRequested() {
	raw := os.Getenv(envConfig)
	if raw == "" {
		return
	}
	var cfg Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "scaleclient:", err)
		os.Exit(2)
	}
	RaiseFileLimit()
	if err := serve(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scaleclient:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RaiseFileLimit raises the process's open-file limit to its hard limit:
// ten thousand connections need more descriptors than the usual soft
// limit of 1024. It returns the limit in force.
func RaiseFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	return lim.Cur
}

// serve runs the command loop of the clients' process.
func serve(cfg Config, in io.Reader, out io.Writer) error {
	if cfg.Dialers <= 0 {
		cfg.Dialers = 32
	}
	p := &pool{cfg: cfg}
	defer p.closeAll()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "connect" && len(f) == 2:
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return fmt.Errorf("connect %q: %w", f[1], err)
			}
			if err := p.connect(n); err != nil {
				return err
			}
			fmt.Fprintf(out, "connected %d\n", len(p.clients))
		case f[0] == "load" && len(f) == 3:
			rate, err1 := strconv.ParseFloat(f[1], 64)
			secs, err2 := strconv.ParseFloat(f[2], 64)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("load: %w", err)
			}
			r := p.load(rate, time.Duration(secs*float64(time.Second)))
			b, _ := json.Marshal(r)
			fmt.Fprintf(out, "result %s\n", b)
		case f[0] == "close":
			p.closeAll()
			fmt.Fprintln(out, "closed")
			return nil
		default:
			return fmt.Errorf("unknown command %q", sc.Text())
		}
	}
	return sc.Err()
}

// pool is the child's clients.
type pool struct {
	cfg     Config
	clients []*client
}

// client is one connection, in a session of its own.
type client struct {
	conn *websocket.Conn
	id   string

	mu      sync.Mutex
	started map[int64]time.Time // the round trips in flight, by their n
	col     atomic.Pointer[collector]
}

// collector gathers a load's round trips.
type collector struct {
	start      time.Time // the load's
	mu         sync.Mutex
	lats       []time.Duration
	slow       []slowCall // those over slowCallAt
	ok, failed atomic.Int64
}

// slowCallAt is the latency over which a round trip is listed by when it
// started ([Result.Slow]): issue 21's p99 goal.
const slowCallAt = 20 * time.Millisecond

// slowCall is one round trip over slowCallAt: when it started, after the
// load's start, and how long it took.
type slowCall struct{ at, took time.Duration }

// connect opens clients until there are n, each registering the
// capability and waiting for its ack.
func (p *pool) connect(n int) error {
	if n <= len(p.clients) {
		return nil
	}
	next := make(chan int)
	errc := make(chan error, p.cfg.Dialers)
	made := make([]*client, n-len(p.clients))
	base := len(p.clients)
	var wg sync.WaitGroup
	for range p.cfg.Dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := p.dial(base + i)
				if err != nil {
					errc <- err
					return
				}
				made[i] = c
			}
		}()
	}
	var err error
feed:
	for i := range made {
		select {
		case next <- i:
		case err = <-errc:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errc)
	for e := range errc {
		err = errors.Join(err, e)
	}
	for _, c := range made {
		if c != nil {
			p.clients = append(p.clients, c)
		}
	}
	return err
}

// dialTimeout bounds one client's connect and registration: a kernel
// that takes longer for one is broken, not slow.
const dialTimeout = 30 * time.Second

func (p *pool) dial(i int) (*client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	id := fmt.Sprintf("%s%06d", p.cfg.Prefix, i)
	conn, _, err := websocket.Dial(ctx, "ws://"+p.cfg.Addr+"/v1/sessions/"+id+"/ws?after=0",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + p.cfg.Token}}})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", id, err)
	}
	conn.SetReadLimit(4 << 20)
	reg, err := protocol.EncodeFrame(&protocol.Frame{ID: "reg", Msg: &protocol.CapabilityRegister{Capabilities: []protocol.Capability{Capability}}})
	if err != nil {
		return nil, err
	}
	if err := conn.Write(ctx, websocket.MessageText, reg); err != nil {
		return nil, fmt.Errorf("register in %s: %w", id, err)
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("register in %s: %w", id, err)
		}
		f, err := protocol.DecodeFrame(data)
		if err != nil {
			return nil, fmt.Errorf("register in %s: %w", id, err)
		}
		if f.Ref != "reg" {
			continue
		}
		if e, ok := f.Msg.(*protocol.ErrorReply); ok {
			return nil, fmt.Errorf("register in %s: %s: %s", id, e.Code, e.Message)
		}
		break
	}
	c := &client{conn: conn, id: id, started: map[int64]time.Time{}}
	go c.readLoop()
	return c, nil
}

// readLoop answers every call with its input, and finishes the round
// trips whose outcomes arrive.
func (c *client) readLoop() {
	for {
		_, data, err := c.conn.Read(context.Background()) // ends when the connection closes
		if err != nil {
			return
		}
		f, err := protocol.DecodeFrame(data)
		if err != nil {
			continue
		}
		switch m := f.Msg.(type) {
		case *protocol.CapabilityInvoked:
			b, err := protocol.EncodeFrame(&protocol.Frame{Msg: &protocol.CapabilityResult{CallID: m.CallID, Result: m.Input}})
			if err == nil {
				_ = c.conn.Write(context.Background(), websocket.MessageText, b)
			}
		case *protocol.CapabilityOutcome:
			var in struct{ N int64 }
			if m.Outcome.Err != nil || json.Unmarshal(m.Outcome.Value, &in) != nil {
				c.finish(-1, false)
				continue
			}
			c.finish(in.N, true)
		case *protocol.ErrorReply:
			if n, err := strconv.ParseInt(strings.TrimPrefix(f.Ref, "i"), 10, 64); err == nil {
				c.finish(n, false)
			}
		}
	}
}

// finish records the end of round trip n.
func (c *client) finish(n int64, ok bool) {
	now := time.Now()
	c.mu.Lock()
	start, found := c.started[n]
	delete(c.started, n)
	c.mu.Unlock()
	col := c.col.Load()
	switch {
	case !found || col == nil:
	case ok:
		took := now.Sub(start)
		col.mu.Lock()
		col.lats = append(col.lats, took)
		if took > slowCallAt {
			col.slow = append(col.slow, slowCall{start.Sub(col.start), took})
		}
		col.mu.Unlock()
		col.ok.Add(1)
	default:
		col.failed.Add(1)
	}
}

// invoke starts round trip n: the client invokes its own capability.
func (c *client) invoke(n int64) error {
	b, err := protocol.EncodeFrame(&protocol.Frame{ID: "i" + strconv.FormatInt(n, 10),
		Msg: &protocol.CapabilityInvoke{Name: Capability.Name, Input: json.RawMessage(`{"n":` + strconv.FormatInt(n, 10) + `}`)}})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.started[n] = time.Now()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	return c.conn.Write(ctx, websocket.MessageText, b)
}

// Result is what a load reports.
type Result struct {
	Clients  int     `json:"clients"`
	Rate     float64 `json:"rate"`     // asked for, round trips per second
	Achieved float64 `json:"achieved"` // sent per second of the load's duration
	Sent     int64   `json:"sent"`
	OK       int64   `json:"ok"`
	Failed   int64   `json:"failed"`  // an error outcome or reply
	Dropped  int64   `json:"dropped"` // no outcome within the grace after the load
	P50      float64 `json:"p50Ms"`
	P99      float64 `json:"p99Ms"`
	P999     float64 `json:"p999Ms"`
	Max      float64 `json:"maxMs"`
	// Slow groups the round trips over 20 ms by the 100 ms in which they
	// started, the busiest ten such windows first: whether the slow ones
	// are spread over the load or come together (a pause of the kernel).
	Slow []SlowWindow `json:"slow,omitempty"`
}

// SlowWindow is the round trips over 20 ms that started in one 100 ms of
// a load.
type SlowWindow struct {
	AtMs  int64   `json:"atMs"` // the window's start, after the load's
	Calls int     `json:"calls"`
	MaxMs float64 `json:"maxMs"`
}

// slowWindows groups slow calls by the 100 ms in which they started and
// returns the ten windows with the most, the most first.
func slowWindows(calls []slowCall) []SlowWindow {
	const width = 100 * time.Millisecond
	by := map[int64]*SlowWindow{}
	for _, c := range calls {
		k := int64(c.at / width)
		w := by[k]
		if w == nil {
			w = &SlowWindow{AtMs: k * width.Milliseconds()}
			by[k] = w
		}
		w.Calls++
		w.MaxMs = max(w.MaxMs, float64(c.took)/float64(time.Millisecond))
	}
	out := make([]SlowWindow, 0, len(by))
	for _, w := range by {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b SlowWindow) int { return cmp.Or(b.Calls-a.Calls, cmp.Compare(a.AtMs, b.AtMs)) })
	return out[:min(len(out), 10)]
}

// grace is how long a load waits, after its last invocation, for the
// outcomes still in flight before it counts them dropped.
const grace = 10 * time.Second

// load makes rate round trips a second for d, spread over every client in
// turn, and reports their latencies: from the client's capability_invoke
// to the capability_outcome it receives.
func (p *pool) load(rate float64, d time.Duration) Result {
	res := Result{Clients: len(p.clients), Rate: rate}
	if len(p.clients) == 0 || rate <= 0 {
		return res
	}
	// The schedule: invocation k is due at start + k/rate; a tick sends
	// every one that is due, so that a late tick catches up instead of
	// lowering the rate.
	start := time.Now()
	col := &collector{start: start}
	for _, c := range p.clients {
		c.col.Store(col)
	}
	total := int64(rate * d.Seconds())
	tick := time.NewTicker(time.Millisecond)
	var sent int64
	next := 0
	for sent < total {
		<-tick.C
		due := min(total, int64(time.Since(start).Seconds()*rate)+1)
		for ; sent < due; sent++ {
			c := p.clients[next]
			next = (next + 1) % len(p.clients)
			if err := c.invoke(sent); err != nil {
				c.finish(sent, false)
			}
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	deadline := time.Now().Add(grace)
	for col.ok.Load()+col.failed.Load() < sent && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling counters, bounded by grace
	}
	for _, c := range p.clients {
		c.col.Store(nil)
		c.mu.Lock()
		clear(c.started)
		c.mu.Unlock()
	}
	col.mu.Lock()
	all := slices.Clone(col.lats)
	res.Slow = slowWindows(col.slow)
	col.mu.Unlock()
	res.Sent, res.OK, res.Failed = sent, col.ok.Load(), col.failed.Load()
	res.Dropped = sent - res.OK - res.Failed
	res.Achieved = float64(sent) / elapsed.Seconds()
	slices.Sort(all)
	q := func(f float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(f*float64(len(all))))]) / float64(time.Millisecond)
	}
	res.P50, res.P99, res.P999, res.Max = q(0.50), q(0.99), q(0.999), q(1)
	return res
}

func (p *pool) closeAll() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, c := range p.clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = c.conn.Close(websocket.StatusNormalClosure, "")
		}()
	}
	wg.Wait()
	p.clients = nil
}
