package server_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
)

// rawPeer is a WebSocket peer written by hand over TCP, so that a test
// decides exactly which bytes reach the kernel in which write.
type rawPeer struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

// upgradeRequest is the HTTP request that opens session id's WebSocket.
func upgradeRequest(host, id string) []byte {
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	return []byte("GET /v1/sessions/" + id + "/ws?after=0 HTTP/1.1\r\nHost: " + host +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
		base64.StdEncoding.EncodeToString(key) + "\r\nAuthorization: Bearer " + clientToken + "\r\n\r\n")
}

// dialRaw opens session id's WebSocket by hand; extra is written in the
// same write as the upgrade request.
func dialRaw(t *testing.T, f *fixture, id string, extra []byte) *rawPeer {
	t.Helper()
	host := strings.TrimPrefix(f.srv.URL, "http://")
	conn, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return openRaw(t, conn, host, id, extra)
}

// openRaw opens session id's WebSocket by hand over conn, to host.
func openRaw(t *testing.T, conn net.Conn, host, id string, extra []byte) *rawPeer {
	t.Helper()
	t.Cleanup(func() { conn.Close() })
	// Every read below is bounded: a frame the kernel never answers fails
	// the test instead of hanging it.
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	p := &rawPeer{t: t, conn: conn, br: bufio.NewReader(conn)}
	p.write(append(upgradeRequest(host, id), extra...))
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	return p
}

func (p *rawPeer) write(b []byte) {
	p.t.Helper()
	if _, err := p.conn.Write(b); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

// maskedFrame is a client's text frame carrying payload (RFC 6455 5.2:
// FIN, a 7- or 16-bit length, the mask).
func maskedFrame(payload []byte) []byte {
	var b []byte
	if len(payload) < 126 {
		b = []byte{0x81, 0x80 | byte(len(payload))}
	} else {
		b = []byte{0x81, 0x80 | 126, 0, 0}
		binary.BigEndian.PutUint16(b[2:], uint16(len(payload)))
	}
	mask := []byte{0x5a, 0xa5, 0x3c, 0xc3}
	b = append(b, mask...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// probe is a frame of exactly wire bytes on the wire that the kernel
// answers with an error reply to id (its type is unknown): the JSON is
// padded with spaces.
func probe(t *testing.T, id string, wire int) []byte {
	t.Helper()
	body := `{"v":2,"id":"` + id + `","msg":{"type":"no_such_message"}}`
	header := 6
	if wire-header >= 126 {
		header = 8
	}
	pad := wire - header - len(body)
	if pad < 0 {
		t.Fatalf("probe %s: %d bytes is too short", id, wire)
	}
	f := maskedFrame([]byte(body + strings.Repeat(" ", pad)))
	if len(f) != wire {
		t.Fatalf("probe %s: %d bytes, want %d", id, len(f), wire)
	}
	return f
}

// readFrame reads one of the kernel's (unmasked) frames.
func (p *rawPeer) readFrame() []byte {
	p.t.Helper()
	_, b := p.readAnyFrame()
	return b
}

// readAnyFrame reads one of the kernel's frames, and returns its opcode
// and payload.
func (p *rawPeer) readAnyFrame() (op byte, payload []byte) {
	p.t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		p.t.Fatalf("read: %v", err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(p.br, l[:]); err != nil {
			p.t.Fatalf("read: %v", err)
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(p.br, l[:]); err != nil {
			p.t.Fatalf("read: %v", err)
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.br, b); err != nil {
		p.t.Fatalf("read: %v", err)
	}
	return h[0] & 0x0f, b
}

// replies reads frames until each of ids has had its reply, and fails on
// a reply that is not an error naming the unknown type.
func (p *rawPeer) replies(ids ...string) {
	p.t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		var f struct {
			Ref string `json:"ref"`
			Msg struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"msg"`
		}
		raw := p.readFrame()
		if err := json.Unmarshal(raw, &f); err != nil {
			p.t.Fatalf("reply %s: %v", raw, err)
		}
		if !want[f.Ref] {
			continue // an event
		}
		if f.Msg.Type != "error" || !strings.Contains(f.Msg.Message, "no_such_message") {
			p.t.Fatalf("reply to %s: %s", f.Ref, raw)
		}
		delete(want, f.Ref)
	}
}

// TestFramesInOneWrite: frames that reach the kernel together are each
// answered, wherever they fall against the connection's 512-byte read
// buffer — the reader waits for the socket only when nothing is
// buffered, and looks in the socket when the buffer ends exactly at a
// frame's end (idlewait.go).
func TestFramesInOneWrite(t *testing.T) {
	f := newFixture(t, nil)
	t.Run("the buffer ends at a frame's end", func(t *testing.T) {
		p := dialRaw(t, f, "w1", nil)
		var b []byte
		b = append(b, probe(t, "a", 512)...) // fills the read buffer exactly
		b = append(b, probe(t, "b", 60)...)  // left in the socket
		b = append(b, probe(t, "c", 700)...)
		p.write(b)
		p.replies("a", "b", "c")
	})
	t.Run("several frames in the buffer", func(t *testing.T) {
		p := dialRaw(t, f, "w2", nil)
		var b []byte
		for i := range 8 {
			b = append(b, probe(t, fmt.Sprint("s", i), 60)...)
		}
		p.write(b)
		p.replies("s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7")
	})
	t.Run("a frame split between writes", func(t *testing.T) {
		p := dialRaw(t, f, "w3", nil)
		fr := probe(t, "x", 300)
		p.write(fr[:3])
		p.write(fr[3:])
		p.replies("x")
	})
	t.Run("frames in the upgrade request's write", func(t *testing.T) {
		p := dialRaw(t, f, "w4", append(probe(t, "u1", 60), probe(t, "u2", 60)...))
		p.replies("u1", "u2")
		p.write(probe(t, "u3", 60)) // and the connection goes on
		p.replies("u3")
	})
}

// TestIdleConnectionStack: an idle connection's one goroutine, its
// reader, waits for the next frame with a stack the collector shrinks to
// 4 KiB after reading frames grew it (it held 8 KiB waiting inside the
// frame reader: issue 21). The race detector's frames are larger:
// test.sh runs this without it.
func TestIdleConnectionStack(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector's frames are larger: test.sh runs this test without it")
	}
	server.SetIdleTick(t, 20*time.Millisecond)
	server.SetHandOffFor(t, 0) // a connection's frames after its first are read on its own goroutine
	f := newFixture(t, nil)
	open := func(from, to int) {
		for i := from; i < to; i++ {
			p := dialRaw(t, f, fmt.Sprint("idle-", i), nil)
			id := fmt.Sprint("p", i)
			p.write(probe(t, id+"a", 60)) // read on a shared reader
			p.replies(id + "a")
			p.write(probe(t, id, 60)) // read and answered on the reader's goroutine: its stack has grown
			p.replies(id)
		}
	}
	const warm, n, attempts = 10, 200, 3
	open(0, warm)
	var per float64
	var goroutines int
	for attempt := range attempts {
		s0, g0 := settledStacks(t)
		open(warm+attempt*n, warm+(attempt+1)*n)
		s1, g1 := settledStacks(t)
		per, goroutines = (float64(s1)-float64(s0))/n, g1-g0
		t.Logf("%d idle connections: %.0f bytes of stack and %.2f goroutines each", n, per, float64(goroutines)/n)
		// The samples are the whole process's: goroutines of the tests
		// before this one that end between them take their stacks with
		// them (fewer goroutines than connections opened, less stack than
		// before). Such a sample says nothing of these connections: they
		// are measured again, with another batch.
		if goroutines >= n && s1 >= s0 {
			break
		}
		if attempt == attempts-1 {
			t.Fatalf("%d samples in a row were disturbed by goroutines ending elsewhere", attempts)
		}
	}
	if goroutines > n+n/20 {
		t.Errorf("%d idle connections hold %d goroutines, want one each", n, goroutines)
	}
	// One 4 KiB stack a connection, and the stack allocator's own: the
	// per-processor caches and part-used spans of freed stacks move
	// StackInuse by up to a couple of hundred KiB (measured: 3.9–4.9 KiB
	// a connection at 100 connections). Waiting in the frame reader held
	// 8 KiB and more (9.8 KiB measured).
	if per > 6<<10 {
		t.Errorf("an idle connection holds %.0f bytes of stack, want at most 6 KiB (one 4 KiB stack)", per)
	}
}

// settledStacks returns the process's stack memory and goroutines once
// the connections' writers have ended and the collector has shrunk what
// it can.
func settledStacks(t *testing.T) (stack uint64, goroutines int) {
	t.Helper()
	waitWriters(t, 20*time.Second)
	// The first collection may find a goroutine mid-park; each halves a
	// stack at most once.
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse, runtime.NumGoroutine()
}

// TestConnectBurstStack: connections opened the way a platform's clients
// open them — many at once, each taking the session's snapshot and
// registering a capability at once — leave each one goroutine with a
// 2 KiB stack. A goroutine's stack is only ever halved by the collector,
// when what it uses parked is under a quarter of it: a connection's
// goroutine that set the connection up, or read its registration, grew to
// 4 KiB and more and kept 4 KiB; the stack allocator's part-used spans
// doubled that (7.6 KiB a connection measured at 1,000, 64 at a time).
func TestConnectBurstStack(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector's frames are larger: test.sh runs this test without it")
	}
	server.SetIdleTick(t, 20*time.Millisecond)
	f := newFixture(t, nil)
	reg, err := protocol.EncodeFrame(&protocol.Frame{ID: "reg", Msg: &protocol.CapabilityRegister{Capabilities: []protocol.Capability{{
		Name: "ui.toast", Description: "Show a toast.", Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	var conns []*websocket.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.CloseNow()
		}
	})
	// connect opens session id's connection, snapshot first, and
	// registers the capability.
	connect := func(id string) (*websocket.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/v1/sessions/"+id+"/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + clientToken}}})
		if err != nil {
			return nil, err
		}
		if err := c.Write(ctx, websocket.MessageText, reg); err != nil {
			return c, err
		}
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return c, err
			}
			fr, err := protocol.DecodeFrame(data)
			if err != nil {
				return c, err
			}
			if fr.Ref == "reg" {
				if e, ok := fr.Msg.(*protocol.ErrorReply); ok {
					return c, fmt.Errorf("register in %s: %s", id, e.Message)
				}
				return c, nil
			}
		}
	}
	// burst opens connections from to to, burstOf at once.
	const burstOf = 32
	burst := func(from, to int) {
		t.Helper()
		made := make([]*websocket.Conn, to-from)
		errs := make([]error, to-from)
		var wg sync.WaitGroup
		for lo := from; lo < to; lo += burstOf {
			for i := lo; i < min(lo+burstOf, to); i++ {
				wg.Go(func() { made[i-from], errs[i-from] = connect(fmt.Sprint("burst-", i)) })
			}
			wg.Wait()
		}
		for _, c := range made {
			if c != nil {
				conns = append(conns, c)
			}
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	const warm, n, attempts = 2 * burstOf, 640, 3
	burst(0, warm)
	var per float64
	for attempt := range attempts {
		s0, g0 := settledStacks(t)
		burst(warm+attempt*n, warm+(attempt+1)*n)
		s1, g1 := settledStacks(t)
		per = (float64(s1) - float64(s0)) / n
		t.Logf("%d connections opened %d at a time: %.0f bytes of stack and %.2f goroutines each", n, burstOf, per, float64(g1-g0)/n)
		if g1-g0 >= n && s1 >= s0 { // as in TestIdleConnectionStack: a sample other tests' goroutines did not disturb
			break
		}
		if attempt == attempts-1 {
			t.Fatalf("%d samples in a row were disturbed by goroutines ending elsewhere", attempts)
		}
	}
	// One 2 KiB stack a connection, a few started at 4 KiB (the runtime
	// starts goroutines at the average stack it last scanned, which a
	// burst's requests raise), and the allocator's part-used spans.
	if per > 3<<10 {
		t.Errorf("a connection opened in a burst holds %.0f bytes of stack, want at most 3 KiB (one 2 KiB stack)", per)
	}
}

// TestTLSConnection: over TLS the reader cannot wait for the socket
// (idlewait.go) and reads where it waits, its first frame included (a
// shared reader handed a frame that has not begun to arrive would wait
// for it as long as the peer likes): the snapshot, a registration and a
// call's round trip go through as over plain TCP.
func TestTLSConnection(t *testing.T) {
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(server.New(server.Options{Tokens: tokens, Manager: server.NewManager(server.ManagerOptions{})}))
	t.Cleanup(ts.Close)
	f := &fixture{t: t, srv: ts}
	c := f.dialWith(clientToken, "tls-1", "", ts.Client())
	if _, ok := c.next().Msg.(*protocol.Snapshot); !ok {
		t.Fatal("the first frame over TLS is not the snapshot")
	}
	c.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{echoCapability}})
	if e, ok := c.reply("reg").Msg.(*protocol.ErrorReply); ok {
		t.Fatalf("register over TLS: %s", e.Message)
	}
	c.send("inv", &protocol.CapabilityInvoke{Name: echoCapability.Name, Input: json.RawMessage(`{"text":"hi"}`)})
	invoked := c.until(func(fr *protocol.Frame) bool { _, ok := fr.Msg.(*protocol.CapabilityInvoked); return ok }).Msg.(*protocol.CapabilityInvoked)
	c.send("res", &protocol.CapabilityResult{CallID: invoked.CallID, Result: invoked.Input})
	out := c.until(func(fr *protocol.Frame) bool { _, ok := fr.Msg.(*protocol.CapabilityOutcome); return ok }).Msg.(*protocol.CapabilityOutcome)
	if out.Outcome.Err != nil || string(out.Outcome.Value) != `{"text":"hi"}` {
		t.Fatalf("the round trip over TLS ended with %+v, want the input back", out.Outcome)
	}
}

// echoCapability is a client capability that the client itself may call.
var echoCapability = protocol.Capability{
	Name: "ui.echo", Description: "Echo the input.", Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient},
	InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	Audience:    []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser},
}
