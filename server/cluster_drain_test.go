package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// TestStopAnswersMCPRequests: a stop waits for an MCP POST being answered
// (within its bound) before it closes the journals, and refuses one that
// arrives meanwhile unserved (503 with Brain-Not-Served), which a
// forwarding node sends to the session's next owner; a WebSocket open
// before the stop starts nothing new meanwhile (a probe's clients had
// kept starting calls until the stop's bound).
func TestStopAnswersMCPRequests(t *testing.T) {
	const modelToken = "model-token-0123456789"
	tokens, err := server.NewTokens(server.Token{Token: modelToken, Side: "model", Tenant: "t"},
		server.Token{Token: clientToken, Side: "client", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(server.ManagerOptions{})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "answered")
	})
	hs := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr,
		MCP: func(*session.Session) http.Handler { return mcp }}))
	t.Cleanup(hs.Close)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before hs.Close, which waits for the handler
	post := func() (*http.Response, string) {
		req, _ := http.NewRequest("POST", hs.URL+"/v1/sessions/d1/mcp", strings.NewReader(initializeBody))
		req.Header.Set("Authorization", "Bearer "+modelToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	answered := make(chan string, 1)
	go func() {
		resp, body := post()
		if resp != nil && resp.StatusCode != 200 {
			body = resp.Status + " " + body
		}
		answered <- body
	}()
	testutil.Recv(t, entered, "the POST being answered")
	f := &fixture{t: t, srv: hs}
	ws := f.dial(clientToken, "d1", "")
	ws.until(ofType(protocol.TypeSnapshot))
	s, drop, err := mgr.Lookup(context.Background(), "d1")
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { mgr.Stop(ctx); close(stopped) }()

	// Once the stop has begun (/readyz says so), a POST is refused
	// unserved.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stop has not begun after 10 s")
		}
		time.Sleep(5 * time.Millisecond) // polling the stop's start, for at most 10 s
	}
	if resp, body := post(); resp == nil || resp.StatusCode != http.StatusServiceUnavailable ||
		resp.Header.Get("Brain-Not-Served") == "" || !strings.Contains(body, "the node is stopping") {
		t.Fatalf("a POST during the stop: %v %s", resp, body)
	}
	ws.send("reg", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("late.cap", false)}})
	if r, ok := ws.reply("reg").Msg.(*protocol.ErrorReply); !ok || r.Code != protocol.CodeUnavailable || !strings.Contains(r.Message, "the node is stopping") {
		t.Fatalf("a registration during the stop: %+v", r)
	}
	// The MCP request being answered goes on: its tools/call is admitted
	// (refused, it reached a forwarding node's caller as the call's
	// outcome, and TestServeClusterFaults failed).
	if perr := mgr.Admit(s); perr != nil {
		t.Fatalf("Admit during the stop, as the MCP endpoint asks: %v", perr)
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while an MCP request was being answered")
	default:
	}
	unblock()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return 30 s after the request was answered")
	}
	if body := <-answered; body != "answered" {
		t.Fatalf("the POST being answered when the stop began got %q", body)
	}
}
