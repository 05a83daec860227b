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
	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// TestRevokedModelTokenEndsItsParkedCall: a model token removed from
// tokens.json while its MCP call waits for approval has that call end,
// cancelled: the POST's request stays open as a socket does, and ends
// with its token. Before, the parked call went on waiting and ran once a
// client approved it — a removed model's call, run after its removal.
func TestRevokedModelTokenEndsItsParkedCall(t *testing.T) {
	k := newTenantKernel(t)
	ctx := testutil.Context(t)
	a := k.dial(tenantAClient, "alice", "")
	a.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeSnapshot })
	// A client without the standalone stream (the GET), which MCP makes
	// optional: the call's own POST is all it holds open.
	c := mcp.NewClient(&mcp.Implementation{Name: "revoked-model", Version: "1"}, nil)
	model, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: k.srv.URL + "/v1/sessions/alice/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{tenantAModel}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	ended := make(chan error, 1)
	// The caller waits for as long as it takes: the call must end because
	// its token did, not because its caller gave up.
	patient, giveUp := context.WithCancel(context.Background())
	t.Cleanup(giveUp)
	go func() {
		r, err := model.CallTool(patient, &mcp.CallToolParams{Name: "fs.write", Arguments: map[string]any{"path": "x"}})
		if err == nil && !r.IsError {
			err = errors.New("the call succeeded")
		}
		ended <- err
	}()
	req := a.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeApprovalRequested }).Msg.(*protocol.ApprovalRequested)

	// Tenant a's model token is removed; the others stay as they were.
	var kept []server.Token
	for _, tok := range tenantTokens() {
		if tok.Token != tenantAModel {
			kept = append(kept, tok)
		}
	}
	if err := k.tokens.Replace(kept); err != nil {
		t.Fatal(err)
	}
	out := a.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeCapabilityOutcome }).Msg.(*protocol.CapabilityOutcome)
	if out.CallID != req.CallID || out.Outcome.Err == nil || out.Outcome.Err.Code != protocol.CodeCancelled {
		t.Fatalf("the parked call's outcome: %+v, want %s cancelled", out, req.CallID)
	}
	testutil.Recv(t, ended, "the removed model's CallTool")
	// The client's approval, too late, runs nothing.
	a.send("late", &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "alice", InputDigest: req.InputDigest})
	if r := a.reply("late"); r.Msg.MessageType() != protocol.TypeError {
		t.Fatalf("the approval after the call ended: %+v, want an error", r.Msg)
	}
	if n := k.runs.Load(); n != 0 {
		t.Fatalf("the removed model's call ran %d times", n)
	}
}
