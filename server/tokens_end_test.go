package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// TestRevokedTokenEndsItsSockets: a token removed from tokens.json, or
// whose grant changed (another tenant), has its open WebSockets closed —
// 4401 with the reason — session and approvals streams alike; a token
// kept as it was keeps its sockets; a revoked model token's MCP event
// stream (the GET) ends too. A probe's removed client token went
// on registering capabilities over a socket opened before, and a removed
// operator's approvals stream went on streaming.
func TestRevokedTokenEndsItsSockets(t *testing.T) {
	kept := server.Token{Token: clientToken, Side: "client", Tenant: "t"}
	removed := server.Token{Token: otherClientToken, Side: "client", Tenant: "u"}
	ops := server.Token{Token: opsToken, Side: "operator", Name: "ops"}
	model := server.Token{Token: modelToken, Side: "model", Tenant: "t"}
	tokens, err := server.NewTokens(kept, removed, ops, model)
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(server.ManagerOptions{})
	// The MCP endpoint's GET holds the event stream open until its
	// request's context ends.
	streaming := make(chan struct{}, 1)
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		streaming <- struct{}{}
		<-r.Context().Done()
	})
	ts := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr, MCP: func(*session.Session) http.Handler { return mcp }}))
	t.Cleanup(ts.Close)
	f := &fixture{t: t, srv: ts, mgr: mgr}
	keptConn := f.dial(clientToken, "k1", "")
	removedConn := f.dial(otherClientToken, "r1", "")
	approvals, _, err := websocket.Dial(testutil.Context(t), "ws"+strings.TrimPrefix(ts.URL, "http")+"/v1/approvals/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + opsToken}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { approvals.CloseNow() })
	req, _ := http.NewRequestWithContext(testutil.Context(t), "GET", ts.URL+"/v1/sessions/k1/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+modelToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	testutil.Recv(t, streaming, "the MCP event stream")

	// closed reads c until it ends, and wants the revocation's close.
	closed := func(what string, c *websocket.Conn) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
		defer cancel()
		var end error
		for end == nil {
			_, _, end = c.Read(ctx)
		}
		var ce websocket.CloseError
		if !errors.As(end, &ce) || ce.Code != 4401 || !strings.Contains(ce.Reason, "removed from tokens.json") {
			t.Fatalf("%s ended with %v, want close 4401 saying the token was removed", what, end)
		}
	}
	// working sends a frame over c and wants its ack.
	working := func(what string, c *wsClient) {
		t.Helper()
		c.send("p", &protocol.CapabilityDeregister{Names: []string{}})
		if r := c.reply("p"); r.Msg.MessageType() != protocol.TypeAck {
			t.Fatalf("%s: %+v, want an ack", what, r.Msg)
		}
	}

	// One token removed, and the model's, the others kept as they were.
	if err := tokens.Replace([]server.Token{kept, ops}); err != nil {
		t.Fatal(err)
	}
	closed("the removed token's session socket", removedConn.conn)
	if _, err := io.Copy(io.Discard, stream.Body); err != nil { // ends when the stream does
		t.Fatalf("the revoked model token's MCP stream: %v, want its end", err)
	}
	working("the kept token's socket", keptConn)
	// The operator's grant changes (its name: who its decisions record),
	// and the kept client's tenant: both end.
	ops.Name = "someone else"
	kept.Tenant = "v"
	if err := tokens.Replace([]server.Token{kept, ops}); err != nil {
		t.Fatal(err)
	}
	closed("the operator's approvals socket", approvals)
	closed("the client's socket, its tenant changed", keptConn.conn)
}
