package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

const (
	otherClientToken = "client-token-other-0123456789"
	opsToken         = "ops-token-limits-0123456789"
)

// newLimited is newFixture with manager options and more tokens.
func newLimited(t testing.TB, mo server.ManagerOptions, o server.Options) (*fixture, *server.Server) {
	t.Helper()
	tokens, err := server.NewTokens(
		server.Token{Token: clientToken, Side: "client", Tenant: "t"},
		server.Token{Token: otherClientToken, Side: "client"},
		server.Token{Token: appToken, Side: "app", App: "cal", Tenant: "t"},
		server.Token{Token: opsToken, Side: "operator", Name: "ops"},
		server.Token{Token: modelToken, Side: "model", Tenant: "t"},
	)
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(mo)
	o.Tokens, o.Manager = tokens, mgr
	srv := server.New(o)
	ts := httptest.NewServer(srv) // listens on 127.0.0.1
	t.Cleanup(ts.Close)
	return &fixture{t: t, srv: ts, mgr: mgr}, srv
}

// get does a request with a token and returns the status and body.
func (f *fixture) get(method, path, token string) (int, string) {
	f.t.Helper()
	return f.send(method, path, token, "")
}

// send is get with a request body.
func (f *fixture) send(method, path, token, body string) (int, string) {
	f.t.Helper()
	return f.sendWith(method, path, token, body, nil)
}

// sendWith is send with more headers.
func (f *fixture) sendWith(method, path, token, body string, header http.Header) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	maps.Copy(req.Header, header)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// dialStatus tries a WebSocket handshake and returns the HTTP status and
// body of a refusal (0 when it succeeded).
func (f *fixture) dialStatus(token, sessionID string) (int, string) {
	f.t.Helper()
	return f.dialStatusQuery(token, sessionID, "")
}

// dialStatusQuery is dialStatus with a query ("?after=3").
func (f *fixture) dialStatusQuery(token, sessionID, query string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+"/v1/sessions/"+sessionID+"/ws"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return 0, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func errorCode(t testing.TB, r *protocol.Frame) protocol.Code {
	t.Helper()
	e, ok := r.Msg.(*protocol.ErrorReply)
	if !ok {
		t.Fatalf("reply %s, want an error", r.Msg.MessageType())
	}
	return e.Code
}

// TestSessionsPerToken: a token creates at most SessionsPerToken sessions;
// reconnecting to one it created is fine, and another token is not
// affected.
func TestSessionsPerToken(t *testing.T) {
	f, _ := newLimited(t, server.ManagerOptions{Limits: server.Limits{SessionsPerToken: 2}}, server.Options{})
	f.dial(clientToken, "q1", "?after=0")
	f.dial(clientToken, "q2", "?after=0")
	status, body := f.dialStatus(clientToken, "q3")
	if status != http.StatusTooManyRequests || !strings.Contains(body, `"code":"quota_exceeded"`) || !strings.Contains(body, "sessions_per_token") {
		t.Fatalf("third session: %d %s, want 429 quota_exceeded naming the limit", status, body)
	}
	if f.mgr.Live() != 2 {
		t.Errorf("%d sessions live, want 2: the refused one must not exist", f.mgr.Live())
	}
	f.dial(clientToken, "q1", "?after=0")                                                 // its own session again
	f.dial(otherClientToken, "q3", "?after=0")                                            // another token
	if status, _ := f.dialStatus(otherClientToken, "q1"); status != http.StatusNotFound { // another tenant's
		t.Fatalf("another tenant's session: status %d, want 404", status)
	}
	f.dial(otherClientToken, "q4", "?after=0")
	if status, _ := f.dialStatus(otherClientToken, "q5"); status != http.StatusTooManyRequests {
		t.Fatalf("the other token's third session: status %d, want 429", status)
	}
}

// TestSessionsPerTokenSaysHowMany: the refusal names the tenant's sessions
// and the limit apart — a tenant past a lowered limit was told it had
// created as many sessions as the limit.
func TestSessionsPerTokenSaysHowMany(t *testing.T) {
	st := &ownedStore{failStore: &failStore{events: map[string][]session.Event{}},
		owned: map[string]string{"old1": "tenant:t", "old2": "tenant:t", "old3": "tenant:t"}}
	f, _ := newLimited(t, server.ManagerOptions{Store: st, Limits: server.Limits{SessionsPerToken: 2}}, server.Options{})
	status, body := f.dialStatus(clientToken, "q1")
	if status != http.StatusTooManyRequests || !strings.Contains(body, "has 3 sessions, and its limit is 2") {
		t.Fatalf("a session past a lowered limit: %d %s, want 429 saying 3 sessions and the limit 2", status, body)
	}
}

// TestFrameRate: a connection sends FrameBurst frames at once; the next
// ones are refused with quota_exceeded (with their ref) and not applied.
func TestFrameRate(t *testing.T) {
	f, _ := newLimited(t, server.ManagerOptions{Limits: server.Limits{FramesPerSecond: 0.01, FrameBurst: 3}}, server.Options{})
	c := f.dial(clientToken, "r1", "?after=0")
	for i := range 5 {
		c.send(fmt.Sprint("f", i), &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap(fmt.Sprint("c.", i), false)}})
	}
	for i := range 5 {
		r := c.reply(fmt.Sprint("f", i))
		if i < 3 {
			if r.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("frame %d: %+v, want ack", i, r.Msg)
			}
			continue
		}
		if code := errorCode(t, r); code != protocol.CodeQuotaExceeded || !strings.Contains(r.Msg.(*protocol.ErrorReply).Message, "frames_per_second") {
			t.Fatalf("frame %d: %+v, want quota_exceeded naming the limit", i, r.Msg)
		}
	}
	s, release, err := f.mgr.Acquire(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, ok := s.Lookup("c.3"); ok {
		t.Error("a frame over the rate was applied")
	}
	// A new connection has its own bucket.
	c2 := f.dial(clientToken, "r1", "?after=0")
	c2.send("n", &protocol.CapabilityDeregister{Names: []string{"nothing"}})
	if r := c2.reply("n"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("a fresh connection: %+v", r.Msg)
	}
}

// TestJournalQuota: once a session's journal holds JournalBytesPerSession,
// new registrations and invocations are refused; results and
// deregistrations still go through, so pending calls end.
func TestJournalQuota(t *testing.T) {
	st := &memStore{frames: map[string][][]byte{}}
	f, _ := newLimited(t, server.ManagerOptions{Store: st, Limits: server.Limits{JournalBytesPerSession: 600}}, server.Options{})
	c := f.dial(clientToken, "j1", "?after=0")
	c.send("r0", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.a", false)}})
	if r := c.reply("r0"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("first register: %+v", r.Msg)
	}
	s, release, err := f.mgr.Acquire(context.Background(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// A pending call, started before the quota is reached.
	done := make(chan protocol.Outcome, 1)
	go func() {
		done <- s.Invoke(context.Background(), protocol.AudienceLLM, "ui.a", json.RawMessage(`{"n":1}`))
	}()
	inv := c.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
	var refused *protocol.Frame
	for i := 1; i < 50 && refused == nil; i++ {
		id := fmt.Sprint("r", i)
		c.send(id, &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap(fmt.Sprint("ui.", i), false)}})
		if r := c.reply(id); r.Msg.MessageType() == protocol.TypeError {
			refused = r
		}
	}
	if refused == nil {
		t.Fatal("registrations never reached the journal quota")
	}
	if e := refused.Msg.(*protocol.ErrorReply); e.Code != protocol.CodeQuotaExceeded || !strings.Contains(e.Message, "journal_bytes_per_session") {
		t.Fatalf("refusal %+v, want quota_exceeded naming the limit", e)
	}
	if n := f.mgr.JournalBytes(s); n < 600 {
		t.Errorf("JournalBytes = %d, want at least the quota", n)
	}
	c.send("i", &protocol.CapabilityInvoke{Name: "ui.a", Input: json.RawMessage(`{"n":2}`)})
	if code := errorCode(t, c.reply("i")); code != protocol.CodeQuotaExceeded {
		t.Fatalf("invoke at the quota: %s, want quota_exceeded", code)
	}
	c.send("t", &protocol.TurnStart{})
	if code := errorCode(t, c.reply("t")); code != protocol.CodeQuotaExceeded {
		t.Fatalf("turn_start at the quota: %s, want quota_exceeded", code)
	}
	c.send("res", &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`"fine"`)})
	if r := c.reply("res"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("result at the quota: %+v, want ack", r.Msg)
	}
	if out := testutil.Recv(t, done, "the pending call's outcome"); string(out.Value) != `"fine"` {
		t.Fatalf("pending call ended %+v", out)
	}
	c.send("d", &protocol.CapabilityDeregister{Names: []string{"ui.a"}})
	if r := c.reply("d"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("deregister at the quota: %+v", r.Msg)
	}
	// Another session is not affected.
	c2 := f.dial(clientToken, "j2", "?after=0")
	c2.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.a", false)}})
	if r := c2.reply("r"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("another session: %+v", r.Msg)
	}
}

// TestOtherSessionsServedAtLimits: while one session is flooded past its
// frame rate, has its journal full and its pending calls at their limit,
// another session on the same kernel completes every round trip.
func TestOtherSessionsServedAtLimits(t *testing.T) {
	st := &memStore{frames: map[string][][]byte{}}
	f, _ := newLimited(t, server.ManagerOptions{
		Store:   st,
		Session: session.Options{MaxPendingCalls: 4},
		Limits:  server.Limits{FramesPerSecond: 100, FrameBurst: 120, JournalBytesPerSession: 4000}, // the quiet client's 101 frames fit the burst
	}, server.Options{})

	// The noisy session: a client capability nobody answers, called until
	// the pending calls are at their limit.
	noisy := f.dial(clientToken, "noisy", "?after=0")
	noisy.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.slow", false)}})
	noisy.reply("r")
	ns, release, err := f.mgr.Acquire(context.Background(), "noisy")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var refusedPending bool
	for range 5 {
		if _, perr := ns.Start(protocol.AudienceLLM, "ui.slow", json.RawMessage(`{"n":1}`)); perr != nil {
			refusedPending = perr.Code == protocol.CodeQuotaExceeded
		}
	}
	if !refusedPending {
		t.Fatal("the fifth pending call was not refused with quota_exceeded")
	}
	// Fill its journal.
	for i := 0; f.mgr.Admit(ns) == nil && i < 200; i++ {
		c := clientCap(fmt.Sprint("ui.fill", i), false)
		c.Description = strings.Repeat("x", 200)
		if err := ns.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
	}
	if f.mgr.Admit(ns) == nil {
		t.Fatal("the journal never reached its quota")
	}
	// The quiet session, on another token: round trips before the flood
	// (the floor) and during it, each bounded.
	quiet := f.dial(otherClientToken, "quiet", "?after=0")
	quiet.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.echo", false)}})
	if r := quiet.reply("r"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("quiet register: %+v", r.Msg)
	}
	qs, qrelease, err := f.mgr.Acquire(context.Background(), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	defer qrelease()
	roundTrips := func(from, n int) []time.Duration {
		var took []time.Duration
		for i := from; i < from+n; i++ {
			start := time.Now()
			done := make(chan protocol.Outcome, 1)
			go func() {
				done <- qs.Invoke(testutil.Context(t), protocol.AudienceLLM, "ui.echo", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
			}()
			inv := quiet.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
			quiet.send(fmt.Sprint("res", i), &protocol.CapabilityResult{CallID: inv.CallID, Result: inv.Input})
			if r := quiet.reply(fmt.Sprint("res", i)); r.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("quiet result %d: %+v", i, r.Msg)
			}
			out := testutil.Recv(t, done, "the quiet session's outcome")
			if out.Err != nil || string(out.Value) != fmt.Sprintf(`{"n":%d}`, i) {
				t.Fatalf("round trip %d: %+v", i, out)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		return took
	}
	before := roundTrips(0, 25)

	// Flood it from two workers, each reading its replies and dialling
	// again (at most 20 times) when the server drops a connection that
	// lets its replies pile up.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Each kind of refusal closes its channel once; the flood runs until
	// both were seen (bounded by testutil.Recv's wait), however slowly a
	// loaded machine lets it reach the rate.
	refusedFor := map[string]chan struct{}{"rate": make(chan struct{}), "journal": make(chan struct{})}
	refusedOnce := map[string]*sync.Once{"rate": {}, "journal": {}}
	refused := make(chan struct{})
	var firstOnce sync.Once
	refuse := func(kind string) {
		refusedOnce[kind].Do(func() { close(refusedFor[kind]) })
	}
	u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/v1/sessions/noisy/ws?after="
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for dials := 0; ctx.Err() == nil && dials < 20; dials++ {
				conn, _, err := websocket.Dial(ctx, u+fmt.Sprint(ns.LastSeq()), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + clientToken}}})
				if err != nil {
					return
				}
				conn.SetReadLimit(8 << 20)
				readDone := make(chan struct{})
				replies := make(chan struct{}, 64)
				go func() {
					defer close(readDone)
					for {
						_, b, err := conn.Read(ctx)
						if err != nil {
							return
						}
						fr, err := protocol.DecodeFrame(b)
						if err != nil {
							continue
						}
						if fr.Ref != "" {
							select {
							case replies <- struct{}{}:
							default: // the writer has stopped waiting
							}
						}
						if e, ok := fr.Msg.(*protocol.ErrorReply); ok {
							switch {
							case strings.Contains(e.Message, "frames_per_second"):
								refuse("rate")
							case strings.Contains(e.Message, "journal_bytes_per_session"):
								refuse("journal")
							}
							firstOnce.Do(func() { close(refused) })
						}
					}
				}()
			flood:
				for i := 0; ctx.Err() == nil && i < 100000; i++ {
					b, _ := protocol.EncodeFrame(&protocol.Frame{ID: fmt.Sprint(w, "-", i), Msg: &protocol.CapabilityInvoke{Name: "ui.slow", Input: json.RawMessage(`{"n":1}`)}})
					if conn.Write(ctx, websocket.MessageText, b) != nil {
						break
					}
					if i%32 == 31 { // far faster than the rate, slow enough to read every reply
						for range 32 {
							select {
							case <-replies:
							case <-readDone:
								break flood
							case <-ctx.Done():
								break flood
							}
						}
					}
				}
				conn.CloseNow()
				<-readDone
			}
		}()
	}
	testutil.Recv(t, refused, "the flood's first refusal")

	during := roundTrips(25, 50)
	for _, kind := range []string{"rate", "journal"} {
		testutil.Recv(t, refusedFor[kind], "the flood's refusal for its "+kind)
	}
	stop()
	wg.Wait()
	t.Logf("quiet session round trip: median %s, slowest %s with the noisy session at its limits (floor before the flood: median %s, slowest %s)",
		during[len(during)/2], during[len(during)-1], before[len(before)/2], before[len(before)-1])
}

// TestTokenInURL: ?token= authenticates a WebSocket handshake only; the
// MCP endpoint and the sessions API refuse a token in the URL.
func TestTokenInURL(t *testing.T) {
	f, _ := newLimited(t, server.ManagerOptions{}, server.Options{MCP: func(*session.Session) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	}})
	f.dial("", "u1", "?token="+clientToken) // a browser's WebSocket
	for _, path := range []string{"/v1/sessions/u1/mcp", "/v1/sessions/u1"} {
		if status, _ := f.get("GET", path+"?token="+modelToken, ""); status != http.StatusUnauthorized {
			t.Errorf("%s?token=: status %d, want 401", path, status)
		}
	}
	if status, _ := f.get("GET", "/v1/sessions/u1/mcp", modelToken); status != http.StatusNoContent {
		t.Errorf("MCP with the header: status %d, want the handler's 204", status)
	}
	do := func(method, path string, header http.Header) int {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+path, nil)
		maps.Copy(req.Header, header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// An Upgrade header does not make an endpoint that is no WebSocket
	// take ?token= (a probe read /metrics, the list and MCP that way).
	upgrade := http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}
	for _, q := range []struct{ method, path, token string }{
		{"POST", "/v1/sessions/u1/mcp", modelToken},
		{"GET", "/v1/sessions", clientToken},
		{"GET", "/v1/sessions/u1", clientToken},
		{"POST", "/v1/sessions/u1/frames", clientToken},
		{"GET", "/v1/sessions/u1/calls/ws", opsToken},
		{"GET", "/v1/approvals", opsToken},
	} {
		if status := do(q.method, q.path+"?token="+q.token, upgrade); status != http.StatusUnauthorized {
			t.Errorf("%s %s?token= with Upgrade: websocket: status %d, want 401", q.method, q.path, status)
		}
	}
	// Nor does a header beside it make one take it: a token in the URL of
	// any other request is refused, the header's good or not (an
	// adversarial probe: the header was served).
	for _, tok := range []string{clientToken, appToken} {
		if status := do("GET", "/v1/sessions/u1?token="+tok, http.Header{"Authorization": {"Bearer " + clientToken}}); status != http.StatusUnauthorized {
			t.Errorf("GET /v1/sessions/u1?token= with a header: status %d, want 401", status)
		}
	}
	if status := do("GET", "/v1/sessions/u1?token=", http.Header{"Authorization": {"Bearer " + clientToken}}); status != http.StatusOK {
		t.Errorf("an empty ?token= beside a header: status %d, want 200 (it presents nothing)", status)
	}
	// Two Origin headers: a browser sends one (the CORS answer echoed both).
	if status := do("GET", "/v1/sessions/u1", http.Header{"Authorization": {"Bearer " + clientToken}, "Origin": {f.srv.URL, "http://evil.example"}}); status != http.StatusBadRequest {
		t.Errorf("two Origin headers: status %d, want 400", status)
	}
	// Only "Bearer <token>" presents a token in the header.
	for h, want := range map[string]int{
		"Bearer " + clientToken:   http.StatusOK,
		"bearer   " + clientToken: http.StatusOK,
		clientToken:               http.StatusUnauthorized,
		"Bearer" + clientToken:    http.StatusUnauthorized,
		"Basic " + clientToken:    http.StatusUnauthorized,
		"Bearer\t" + clientToken:  http.StatusUnauthorized,
	} {
		h = strings.ReplaceAll(h, "\\t", "\t")
		if status := do("GET", "/v1/sessions/u1", http.Header{"Authorization": {h}}); status != want {
			t.Errorf("Authorization %q: status %d, want %d", h, status, want)
		}
	}
	// A handshake whose header and ?token= name two tokens presents
	// neither (the header won), and is told so; the same token twice is
	// one.
	f.dial(clientToken, "u1", "?token="+clientToken)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/v1/sessions/u1/ws?token="+appToken,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + clientToken}}})
	if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a handshake with two tokens: %v, want 401", err)
	}
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "two different tokens") {
		t.Errorf("a handshake with two tokens was told %s", body)
	}
	// Two ?token= values, and two Authorization headers, are two tokens
	// too (the re-probe: the first was taken).
	_, resp, err = websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/v1/sessions/u1/ws?token="+clientToken+"&token="+appToken, nil)
	if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a handshake with two ?token=: %v, want 401", err)
	}
	if status := do("GET", "/v1/sessions/u1", http.Header{"Authorization": {"Bearer " + clientToken, "Bearer " + opsToken}}); status != http.StatusUnauthorized {
		t.Errorf("two Authorization headers: status %d, want 401", status)
	}
	// One token given twice is one; a proxy's Basic header beside a
	// browser's ?token= presents no other token (the re-probe: 401).
	if status := do("GET", "/v1/sessions/u1", http.Header{"Authorization": {"Bearer " + clientToken, "Bearer " + clientToken}}); status != http.StatusOK {
		t.Errorf("one Authorization header twice: status %d, want 200", status)
	}
	for _, c := range []struct{ query, header string }{
		{"?token=" + clientToken + "&token=" + clientToken, ""},
		{"?token=" + clientToken, "Basic dXNlcjpwYXNz"},
		{"?token=&token=" + clientToken, ""},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("Authorization", c.header)
		}
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/v1/sessions/u1/ws"+c.query, &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Errorf("a handshake with %s and %q: %v, want it open", c.query, c.header, err)
			continue
		}
		conn.CloseNow()
	}
}

// TestMetricsEndpoint: /metrics answers operator tokens only.
func TestMetricsEndpoint(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "brain_up 1\n") })
	f, _ := newLimited(t, server.ManagerOptions{}, server.Options{Metrics: metrics})
	tests := []struct {
		name, token string
		status      int
	}{
		{"operator", opsToken, http.StatusOK},
		{"client", clientToken, http.StatusForbidden},
		{"app", appToken, http.StatusForbidden},
		{"none", "", http.StatusUnauthorized},
		{"wrong", "wrong-token-0123456789", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.get("GET", "/metrics", tt.token)
			if status != tt.status || (status == http.StatusOK) != strings.Contains(body, "brain_up 1") {
				t.Fatalf("status %d body %q, want %d", status, body, tt.status)
			}
		})
	}
	if status, _ := f.get("GET", "/metrics?token="+opsToken, ""); status != http.StatusUnauthorized {
		t.Errorf("?token= on /metrics: status %d, want 401", status)
	}
	g, _ := newLimited(t, server.ManagerOptions{}, server.Options{})
	if status, _ := g.get("GET", "/metrics", opsToken); status != http.StatusNotFound {
		t.Errorf("without Options.Metrics: status %d, want 404", status)
	}
}

// TestStats: connections are counted by side while open; sessions live
// and hibernated are counted from memory and the store.
func TestStats(t *testing.T) {
	st := &listingStore{memStore: memStore{frames: map[string][][]byte{}}}
	f, srv := newLimited(t, server.ManagerOptions{Store: st}, server.Options{})
	c := f.dial(clientToken, "t1", "?after=0")
	a := f.dial(appToken, "t1", "?after=0")
	c.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.a", false)}})
	c.reply("r")
	a.send("p", &protocol.CapabilityDeregister{Names: []string{}})
	a.reply("p") // both connections are being served
	if got := srv.Connections(); got["client"] != 1 || got["app"] != 1 {
		t.Fatalf("Connections = %v, want a client and an app", got)
	}
	st.extra = []string{"old1", "old2"}
	if live, hib := f.mgr.Counts(context.Background()); live != 1 || hib != 2 {
		t.Fatalf("Counts = %d live %d hibernated, want 1 and 2", live, hib)
	}
	a.conn.CloseNow()
	deadline := time.Now().Add(testutil.WaitLimit)
	for srv.Connections()["app"] != 0 { // the server notices the close on its own goroutine
		if time.Now().After(deadline) {
			t.Fatalf("Connections = %v after the app closed", srv.Connections())
		}
		time.Sleep(5 * time.Millisecond) // polling a counter, not synchronising
	}
}

// TestMCPConnectionsCounted: an MCP request in flight counts as a
// connection of side mcp until its handler returns.
func TestMCPConnectionsCounted(t *testing.T) {
	entered, leave := make(chan struct{}), make(chan struct{})
	f, srv := newLimited(t, server.ManagerOptions{}, server.Options{MCP: func(*session.Session) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			entered <- struct{}{}
			<-leave
			w.WriteHeader(http.StatusNoContent)
		})
	}})
	// The session, which an MCP GET does not create.
	if status, body := f.send("POST", "/v1/sessions", clientToken, `{"id":"m1"}`); status != http.StatusCreated {
		t.Fatalf("create m1: %d %s", status, body)
	}
	done := make(chan int, 1)
	go func() {
		status, _ := f.get("GET", "/v1/sessions/m1/mcp", modelToken)
		done <- status
	}()
	testutil.Recv(t, entered, "the MCP handler")
	if got := srv.Connections(); got["mcp"] != 1 || got["client"] != 0 {
		t.Fatalf("Connections = %v during an MCP request, want mcp 1 and no WebSocket client", got)
	}
	close(leave)
	if status := testutil.Recv(t, done, "the MCP response"); status != http.StatusNoContent {
		t.Fatalf("status %d", status)
	}
	if got := srv.Connections(); got["mcp"] != 0 {
		t.Fatalf("Connections = %v after the MCP request ended, want mcp 0", got)
	}
	if status, _ := f.get("GET", "/v1/sessions/m1/mcp", appToken); status != http.StatusForbidden {
		t.Fatalf("an app token on MCP: status %d, want 403", status)
	}
	if got := srv.Connections(); got["mcp"] != 0 {
		t.Fatalf("a refused MCP request was counted: %v", got)
	}
}

// listingStore is a memStore that lists its sessions (plus extra ones).
type listingStore struct {
	memStore
	extra []string
}

func (st *listingStore) Sessions(context.Context) ([]string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := append([]string(nil), st.extra...)
	for id := range st.frames {
		out = append(out, id)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (st *listingStore) SessionsPage(ctx context.Context, after string, limit int) ([]string, bool, error) {
	all, _ := st.Sessions(ctx)
	i, found := slices.BinarySearch(all, after)
	if found {
		i++
	}
	all = all[i:]
	if len(all) > limit {
		return all[:limit], true, nil
	}
	return all, false, nil
}

func (st *listingStore) SessionCount(ctx context.Context) (int, error) {
	all, _ := st.Sessions(ctx)
	return len(all), nil
}

// TestSessionsPerTokenAcrossRestart: with package store, the sessions a
// token created still count after a restart.
func TestSessionsPerTokenAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() (*fixture, func()) {
		st, err := store.Open(testutil.Context(t), &store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		f, _ := newLimited(t, server.ManagerOptions{Store: st, Limits: server.Limits{SessionsPerToken: 2}}, server.Options{})
		return f, func() { f.srv.CloseClientConnections(); f.srv.Close(); _ = st.Close() }
	}
	f, stop := start()
	for _, id := range []string{"p1", "p2"} {
		c := f.dial(clientToken, id, "?after=0")
		c.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.a", false)}})
		c.reply("r") // the session has a past, so it is restored after the restart
		c.conn.CloseNow()
	}
	stop()

	f, stop = start()
	defer stop()
	if status, body := f.dialStatus(clientToken, "p3"); status != http.StatusTooManyRequests {
		t.Fatalf("a third session after a restart: %d %s, want 429", status, body)
	}
	f.dial(clientToken, "p1", "?after=0")      // its own, restored
	f.dial(otherClientToken, "p3", "?after=0") // another token's first
}

// TestDeleteGivesSessionBack: deleting a session gives its token the
// session back.
func TestDeleteGivesSessionBack(t *testing.T) {
	st := &listingStore{memStore: memStore{frames: map[string][][]byte{}}}
	f, _ := newLimited(t, server.ManagerOptions{Store: st, Limits: server.Limits{SessionsPerToken: 1}}, server.Options{})
	c := f.dial(clientToken, "d1", "?after=0")
	c.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.a", false)}})
	c.reply("r")
	if status, _ := f.dialStatus(clientToken, "d2"); status != http.StatusTooManyRequests {
		t.Fatalf("a second session: status %d, want 429", status)
	}
	if status, body := f.get("DELETE", "/v1/sessions/d1", opsToken); status != http.StatusOK && status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	f.dial(clientToken, "d2", "?after=0")
}

// TestFramesEndpointLimits: POST /v1/sessions/{id}/frames refuses a
// frame carrying the kernel's seq, and an invocation once the session's
// journal is full (429 quota_exceeded).
func TestFramesEndpointLimits(t *testing.T) {
	st := &memStore{frames: map[string][][]byte{}}
	f, _ := newLimited(t, server.ManagerOptions{Store: st, Limits: server.Limits{JournalBytesPerSession: 300}}, server.Options{})
	c := f.dial(clientToken, "fe", "?after=0")
	user := clientCap("ui.a", false)
	user.Audience = []protocol.Audience{protocol.AudienceUser}
	c.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{user}})
	c.reply("r")
	post := func(frame string) (int, string) {
		req, _ := http.NewRequest("POST", f.srv.URL+"/v1/sessions/fe/frames", strings.NewReader(frame))
		req.Header.Set("Authorization", "Bearer "+opsToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post(`{"v":2,"id":"x","seq":9,"msg":{"type":"capability_cancel","callId":"nope"}}`); status != http.StatusBadRequest || !strings.Contains(body, "seq: set by the kernel only") {
		t.Fatalf("a frame with seq: %d %s", status, body)
	}
	for i := 0; ; i++ { // fill the journal
		s, release, err := f.mgr.Acquire(context.Background(), "fe")
		if err != nil {
			t.Fatal(err)
		}
		full := f.mgr.Admit(s) != nil
		if !full {
			cp := clientCap(fmt.Sprint("ui.fill", i), false)
			if err := s.Register(session.Client, cp); err != nil {
				t.Fatal(err)
			}
		}
		release()
		if full {
			break
		}
	}
	status, body := post(`{"v":2,"id":"i","msg":{"type":"capability_invoke","name":"ui.a","input":{}}}`)
	if status != http.StatusTooManyRequests || !strings.Contains(body, `"code":"quota_exceeded"`) || !strings.Contains(body, `"ref":"i"`) {
		t.Fatalf("an invocation at the journal quota: %d %s, want 429 quota_exceeded with ref i", status, body)
	}
}

// TestBurstWithoutReading: a peer sends a burst of frames — within the
// documented frame_burst, more than the replies the kernel queues — before
// it reads a single reply: every frame is applied and answered, and the
// connection stays open (a burst of 96 closed it before).
func TestBurstWithoutReading(t *testing.T) {
	f, _ := newLimited(t, server.ManagerOptions{}, server.Options{})
	c := f.dial(clientToken, "burst", "?after=0")
	const n = 300
	for i := range n {
		c.send(fmt.Sprint("b", i), &protocol.CapabilityDeregister{Names: []string{}})
	}
	for i := range n {
		if r := c.reply(fmt.Sprint("b", i)); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatalf("frame %d: %+v", i, r.Msg)
		}
	}
}

// TestRefusedJoinCreatesNothing: a token refused at a session's door —
// any side but the model's on the MCP endpoint, the model's on the
// WebSocket — is told why (403, its side named with its article) and
// creates no session: a probe found the refused requests had created
// the sessions they asked for, each taking the id and a place in its
// tenant's quota.
func TestRefusedJoinCreatesNothing(t *testing.T) {
	f, _ := newLimited(t, server.ManagerOptions{}, server.Options{MCP: func(*session.Session) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	}})
	for i, q := range []struct{ path, token, side string }{
		{"/mcp", clientToken, "a client"},
		{"/mcp", appToken, "an app"},
		{"/mcp", opsToken, "an operator"},
		{"/ws", modelToken, ""},
	} {
		id := fmt.Sprintf("refused-%d", i)
		var status int
		var body string
		if q.path == "/ws" {
			status, body = f.dialStatus(q.token, id)
		} else {
			status, body = f.send("POST", "/v1/sessions/"+id+q.path, q.token, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
		if status != http.StatusForbidden || !strings.Contains(body, q.side+" token") {
			t.Errorf("%s with %s's token: %d %s, want 403 naming %q", q.path, q.side, status, body, q.side+" token")
		}
		if status, body := f.get("GET", "/v1/sessions/"+id, opsToken); status != http.StatusNotFound {
			t.Errorf("after a refused %s: session %s is %d %s, want 404 (not created)", q.path, id, status, body)
		}
	}
	// A model token's MCP request creates its session only if it is an
	// initialize: the rest would be refused by the MCP endpoint (a probe
	// saw a GET, a DELETE, a broken body and a stranger's MCP session id
	// each take an id and a place in the tenant's quota).
	for i, q := range []struct{ method, sid, body string }{
		{"GET", "", ""},
		{"DELETE", "", ""},
		{"POST", "", `{"jsonrpc":`},
		{"POST", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"POST", "", `{"jsonrpc":"2.0","id":1,"Method":"initialize"}`},
		{"POST", "b1.forged", initializeBody},
	} {
		id := fmt.Sprintf("not-created-%d", i)
		req, _ := http.NewRequest(q.method, f.srv.URL+"/v1/sessions/"+id+"/mcp", strings.NewReader(q.body))
		req.Header.Set("Authorization", "Bearer "+modelToken)
		if q.sid != "" {
			req.Header.Set("Mcp-Session-Id", q.sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "initialize") {
			t.Errorf("%s %q (session id %q): %d %s, want 404 saying initialize starts a session", q.method, q.body, q.sid, resp.StatusCode, body)
		}
		if status, body := f.get("GET", "/v1/sessions/"+id, opsToken); status != http.StatusNotFound {
			t.Errorf("after %s %q: session %s is %d %s, want 404 (not created)", q.method, q.body, id, status, body)
		}
	}
	if status, body := f.send("POST", "/v1/sessions/created/mcp", modelToken, initializeBody); status != http.StatusNoContent {
		t.Fatalf("initialize: %d %s, want the MCP handler's 204", status, body)
	}
	if status, body := f.get("GET", "/v1/sessions/created", opsToken); status != http.StatusOK {
		t.Fatalf("after an initialize: %d %s, want the session", status, body)
	}
}

// TestBodyMustArrive: a POST whose body trickles — MCP, a create, a
// frame — is answered 408 once its bound passes — it was held open for as
// long as its sender liked, its session with it, and a stop waited for it
// (a probe held a create and a frame for over two minutes) — while a POST
// whose answer streams for longer than that bound (a call awaiting
// approval) is not cut by it.
func TestBodyMustArrive(t *testing.T) {
	server.SetBodyWithin(t, 200*time.Millisecond)
	release := make(chan struct{})
	f, _ := newLimited(t, server.ManagerOptions{}, server.Options{MCP: func(*session.Session) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release // an answer that takes longer than the body's bound
			_, _ = w.Write(b)
		})
	}})
	// A body that never arrives whole: 11 of the 100 bytes its headers
	// announce, over a connection of the test's own — to every endpoint
	// that reads a body.
	f.dial("", "b2", "?token="+clientToken) // the frame's session
	for _, q := range []struct{ path, token string }{
		{"/v1/sessions/b1/mcp", modelToken},
		{"/v1/sessions", clientToken},
		{"/v1/sessions/b2/frames", clientToken},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(testutil.WaitLimit))
		if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":", q.path, q.token); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", q.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive whole") {
			t.Fatalf("a trickling body to %s: %d %s, want 408", q.path, resp.StatusCode, body)
		}
	}
	// A whole body whose answer outlasts the bound.
	// The answer comes after three of the body's bounds (200 ms): the
	// body's deadline must be gone by then.
	time.AfterFunc(600*time.Millisecond, func() { close(release) })
	status, got := f.send("POST", "/v1/sessions/b1/mcp", modelToken, initializeBody)
	if status != http.StatusOK || got != initializeBody {
		t.Fatalf("a slow answer: %d %q", status, got)
	}
}

// initializeBody is an MCP initialize request: the one request that
// creates the session it names.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}`
