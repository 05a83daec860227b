package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

const (
	clientToken = "client-token-0123456789"
	appToken    = "app-token-cal-0123456789"
	modelToken  = "model-token-0123456789"
)

type fixture struct {
	t   testing.TB
	srv *httptest.Server
	mgr *server.Manager
}

func newFixture(t testing.TB, opts *server.Options) *fixture {
	t.Helper()
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Tenant: "t"}, server.Token{Token: appToken, Side: "app", App: "cal", Tenant: "t"},
		server.Token{Token: modelToken, Side: "model", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(server.ManagerOptions{})
	o := server.Options{}
	if opts != nil {
		o = *opts
	}
	o.Tokens, o.Manager = tokens, mgr
	ts := httptest.NewServer(server.New(o)) // listens on 127.0.0.1
	t.Cleanup(ts.Close)
	return &fixture{t: t, srv: ts, mgr: mgr}
}

// wsClient is a minimal peer: it sends frames and reads frames.
type wsClient struct {
	t    testing.TB
	conn *websocket.Conn
	ctx  context.Context
	seen uint64 // the highest seq read
}

func (f *fixture) dial(token, sessionID, query string) *wsClient {
	return f.dialWith(token, sessionID, query, nil)
}

// dialWith dials with an HTTP client of its own (nil: the default).
func (f *fixture) dialWith(token, sessionID, query string, hc *http.Client) *wsClient {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	f.t.Cleanup(cancel)
	u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/v1/sessions/" + sessionID + "/ws" + query
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		f.t.Fatalf("dial: %v", err)
	}
	conn.SetReadLimit(8 << 20)
	f.t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: f.t, conn: conn, ctx: ctx}
}

func (c *wsClient) sendRaw(s string) {
	c.t.Helper()
	if err := c.conn.Write(c.ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *wsClient) send(id string, m protocol.Message) {
	c.t.Helper()
	b, err := protocol.EncodeFrame(&protocol.Frame{ID: id, Msg: m})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

func (c *wsClient) next() *protocol.Frame {
	c.t.Helper()
	_, b, err := c.conn.Read(c.ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	f, err := protocol.DecodeFrame(b)
	if err != nil {
		c.t.Fatalf("the server sent an undecodable frame: %v\n%s", err, b)
	}
	c.seen = max(c.seen, f.Seq)
	return f
}

// until reads frames until one matches.
func (c *wsClient) until(match func(*protocol.Frame) bool) *protocol.Frame {
	c.t.Helper()
	for {
		if f := c.next(); match(f) {
			return f
		}
	}
}

func (c *wsClient) reply(id string) *protocol.Frame {
	c.t.Helper()
	return c.until(func(f *protocol.Frame) bool { return f.Ref == id })
}

func ofType(t protocol.Type) func(*protocol.Frame) bool {
	return func(f *protocol.Frame) bool { return f.Msg.MessageType() == t }
}

func clientCap(name string, approval bool) protocol.Capability {
	return protocol.Capability{Name: name, Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}, RequiresApproval: approval}
}

// TestClientCapabilityRoundTrip: a WebSocket client registers a capability,
// the LLM invokes it through the session, the client answers; an approval
// flows the same way.
func TestClientCapabilityRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(clientToken, "s1", "")
	if snap := c.next(); snap.Msg.MessageType() != protocol.TypeSnapshot {
		t.Fatalf("first frame = %s, want a snapshot", snap.Msg.MessageType())
	}
	show := clientCap("ui.show", false)
	show.Audience = []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser} // client capabilities are not user-invokable by default
	c.send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{show, clientCap("ui.delete", true)}})
	if r := c.reply("r1"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("register reply = %+v", r.Msg)
	}
	s, release, err := f.mgr.Acquire(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	done := make(chan protocol.Outcome, 2)
	go func() {
		done <- s.Invoke(context.Background(), protocol.AudienceLLM, "ui.show", json.RawMessage(`{"n":1}`))
	}()
	inv := c.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
	c.send("x1", &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{"shown":1}`)})
	if out := <-done; !out.IsOK() || string(out.Value) != `{"shown":1}` {
		t.Fatalf("outcome = %+v %s", out.Err, out.Value)
	}

	go func() {
		done <- s.Invoke(context.Background(), protocol.AudienceLLM, "ui.delete", json.RawMessage(`{"n":2}`))
	}()
	req := c.until(ofType(protocol.TypeApprovalRequested)).Msg.(*protocol.ApprovalRequested)
	c.send("a1", &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionRejected, Feedback: "no", DecidedBy: "ada"})
	if out := <-done; out.IsOK() || out.Err.Code != protocol.CodeRejected || !strings.Contains(out.Err.Message, "no") {
		t.Fatalf("outcome = %+v", out.Err)
	}
	// A second decision is refused, the connection is still usable.
	c.send("a2", &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: req.InputDigest})
	if r := c.reply("a2").Msg.(*protocol.ErrorReply); r.Code != protocol.CodeConflict {
		t.Fatalf("second decision reply = %+v", r)
	}
	// A user invocation from the client.
	// The ack and the invoked event travel separately: either may come first.
	c.send("u1", &protocol.CapabilityInvoke{Name: "ui.show", Input: json.RawMessage(`{"n":3}`)})
	var ack *protocol.Ack
	inv = nil
	for ack == nil || inv == nil {
		fr := c.next()
		switch m := fr.Msg.(type) {
		case *protocol.Ack:
			if fr.Ref == "u1" {
				ack = m
			}
		case *protocol.CapabilityInvoked:
			inv = m
		}
	}
	if inv.CallID != ack.CallID {
		t.Fatalf("ack call id %s, invoked %s", ack.CallID, inv.CallID)
	}
}

// TestBadFramesKeepTheConnection: malformed, unknown and oversized frames
// get an error reply; the connection stays usable.
func TestBadFramesKeepTheConnection(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(clientToken, "s2", "?after=0")
	tests := []struct {
		name, frame string
		code        protocol.Code
		ref         string
	}{
		{"not JSON", `{nope`, protocol.CodeInvalidRequest, ""},
		{"unknown type", `{"v":2,"id":"q1","msg":{"type":"capability_explode"}}`, protocol.CodeInvalidRequest, "q1"},
		{"wrong version", `{"v":3,"id":"q2","msg":{"type":"resume","afterSeq":0}}`, protocol.CodeInvalidRequest, "q2"},
		{"kernel message", `{"v":2,"id":"q3","msg":{"type":"capability_invoked","callId":"c","name":"n","input":{},"invokedBy":"agent"}}`, protocol.CodeInvalidRequest, "q3"},
		{"oversized", `{"v":2,"msg":{"type":"capability_deregister","names":["` + strings.Repeat("x", protocol.MaxFrameBytes) + `"]}}`, protocol.CodeTooLarge, ""},
		{"oversized, its id first", `{"v":2,"id":"q5","msg":{"type":"capability_deregister","names":["` + strings.Repeat("x", protocol.MaxFrameBytes) + `"]}}`, protocol.CodeTooLarge, "q5"},
		{"oversized, its id past the cut", `{"v":2,"msg":{"type":"capability_deregister","names":["` + strings.Repeat("x", protocol.MaxFrameBytes) + `"]},"id":"q6"}`, protocol.CodeTooLarge, ""},
		{"forbidden origin", `{"v":2,"id":"q4","msg":{"type":"capability_register","capabilities":[{"name":"a","description":"d","inputSchema":{},"side":"agent","origin":{"kind":"agent"}}]}}`, protocol.CodeForbidden, "q4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.sendRaw(tt.frame)
			r := c.until(ofType(protocol.TypeError))
			if e := r.Msg.(*protocol.ErrorReply); e.Code != tt.code || r.Ref != tt.ref {
				t.Fatalf("reply = %+v ref %q, want %s ref %q", e, r.Ref, tt.code, tt.ref)
			}
			c.send("ok", &protocol.CapabilityDeregister{Names: []string{"nothing"}})
			if r := c.reply("ok"); r.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("the connection is not usable after a bad frame: %+v", r.Msg)
			}
		})
	}
}

// TestResume: a client reconnecting with the last seq it saw receives
// exactly what it missed.
func TestResume(t *testing.T) {
	f := newFixture(t, nil)
	c := f.dial(clientToken, "s3", "?after=0")
	for i := range 3 {
		id := fmt.Sprint("r", i)
		c.send(id, &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap(fmt.Sprint("c.", i), false)}})
		c.reply(id)
	}
	c.conn.CloseNow()
	c2 := f.dial(clientToken, "s3", "?after=1")
	for want := uint64(2); want <= 3; want++ {
		ev := c2.until(func(f *protocol.Frame) bool { return f.Ref == "" })
		if ev.Seq != want || ev.Msg.MessageType() != protocol.TypeCapabilityRegister {
			t.Fatalf("got seq %d %s, want seq %d capability_register", ev.Seq, ev.Msg.MessageType(), want)
		}
	}
	// resume as a frame on a live connection
	c2.send("z", &protocol.Resume{AfterSeq: 0})
	ev := c2.until(func(f *protocol.Frame) bool { return f.Ref == "" && f.Seq == 1 })
	if ev.Msg.MessageType() != protocol.TypeCapabilityRegister {
		t.Fatalf("after resume: %s", ev.Msg.MessageType())
	}
}

// TestAppSeesOnlyItsOwn: an app registers only its own capabilities and
// sees only its own calls.
func TestAppSeesOnlyItsOwn(t *testing.T) {
	f := newFixture(t, nil)
	app := f.dial(appToken, "s4", "?after=0")
	appCap := protocol.Capability{Name: "cal.add", Description: "d", InputSchema: json.RawMessage(`{}`), Side: protocol.SideApp, Origin: protocol.Origin{Kind: protocol.OriginApp, ID: "cal"}}
	app.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{appCap}})
	if r := app.reply("r"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("app register: %+v", r.Msg)
	}
	other := appCap
	other.Name, other.Origin.ID = "mail.send", "mail"
	app.send("r2", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{other}})
	if r := app.reply("r2").Msg.(*protocol.ErrorReply); r.Code != protocol.CodeForbidden {
		t.Fatalf("registering another app's capability: %+v", r)
	}
	client := f.dial(clientToken, "s4", "?after=0")
	client.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.secret", false)}})
	client.reply("r")
	s, release, _ := f.mgr.Acquire(context.Background(), "s4")
	defer release()
	go s.Invoke(context.Background(), protocol.AudienceLLM, "ui.secret", json.RawMessage(`{"n":42}`))
	client.until(ofType(protocol.TypeCapabilityInvoked))
	done := make(chan protocol.Outcome, 1)
	go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "cal.add", json.RawMessage(`{}`)) }()
	inv := app.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
	if inv.Name != "cal.add" {
		t.Fatalf("the app saw a call to %s", inv.Name)
	}
	app.send("x", &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`"added"`)})
	if out := <-done; string(out.Value) != `"added"` {
		t.Fatalf("outcome = %+v", out)
	}
}

// TestBadTokens: every endpoint refuses a missing or wrong token.
func TestBadTokens(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/v1/sessions/s5/ws", "/v1/sessions/s5", "/v1/sessions/s5/mcp"} {
		for _, token := range []string{"", "wrong-token-0123456789", clientToken + "x"} {
			t.Run(path+"/"+token, func(t *testing.T) {
				req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401", resp.StatusCode)
				}
			})
		}
	}
	if f.mgr.Live() != 0 {
		t.Errorf("an unauthenticated request opened a session")
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/v1/sessions/bad.id/ws", nil)
	req.Header.Set("Authorization", "Bearer "+clientToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad session id: status %d", resp.StatusCode)
	}
}

// TestSlowPeerDisconnected: a peer that stops reading while events pile up
// is disconnected with a reason; the server's memory stays bounded because
// subscriptions read the session's log instead of buffering.
func TestSlowPeerDisconnected(t *testing.T) {
	logs := make(chan slog.Record, 64)
	f := newFixture(t, &server.Options{WriteTimeout: 200 * time.Millisecond, Logger: slog.New(chanHandler(logs))})
	// A small receive buffer, so that a few MiB fill the path; otherwise
	// loopback autotuning absorbs tens of MiB first.
	small := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
		if err != nil {
			return err
		}
		return serr
	}}
	slow := f.dialWith(clientToken, "s6", "?after=0", &http.Client{Transport: &http.Transport{DialContext: small.DialContext}})
	s, release, _ := f.mgr.Acquire(context.Background(), "s6")
	defer release()
	noise := make([]byte, 192<<10)
	_, _ = rand.Read(noise)
	big := base64.StdEncoding.EncodeToString(noise) // incompressible: the connection may be compressed
	for i := range 48 {                             // 12 MiB of events: more than the socket buffers hold
		c := clientCap(fmt.Sprint("big.", i%8), false)
		c.Description = big + fmt.Sprint(i) // a change each time: an unchanged re-registration emits nothing
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
	}
	// The peer never reads; the server must give up on it.
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-logs:
			if r.Message != "peer disconnected" {
				continue
			}
			var reason string
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "reason" {
					reason = a.Value.String()
				}
				return true
			})
			if !strings.Contains(reason, "write: the peer has not read for 200ms") {
				t.Fatalf("disconnected for %q, want a write timeout", reason)
			}
			slow.conn.CloseNow()
			return
		case <-timeout:
			t.Fatal("the server kept a peer that does not read")
		}
	}
}

// chanHandler sends every record to a channel (dropping when it is full).
type chanHandler chan slog.Record

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Clone():
	default:
	}
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }

// TestSnapshotBeforeFirstReply: a peer that connects without a seq gets
// the snapshot as its first frame even when it sends a command before
// reading and the command's reply is ready before the connection's writer
// has run (the writer takes replies before events).
func TestSnapshotBeforeFirstReply(t *testing.T) {
	var once sync.Once
	server.SetWriterStarts(t, func(replies func() int) {
		once.Do(func() {
			// The first writer waits for the reply of the peer's first
			// command: its reader applies it meanwhile. Bounded, in case
			// the reply never comes (the test then fails on its frames).
			for end := time.Now().Add(10 * time.Second); replies() == 0 && time.Now().Before(end); {
				runtime.Gosched()
			}
		})
	})
	f := newFixture(t, nil)
	c := f.dial(clientToken, "snapfirst", "")
	c.send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("first.cap", false)}})
	if first := c.next(); first.Msg.MessageType() != protocol.TypeSnapshot {
		t.Fatalf("the first frame is %s (seq %d, ref %q), want the snapshot", first.Msg.MessageType(), first.Seq, first.Ref)
	}
	if r := c.reply("r1"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("the reply is %s", r.Msg.MessageType())
	}
}
