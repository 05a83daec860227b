package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

const (
	tenantAClient = "tenant-a-client-0123456789"
	tenantAModel  = "tenant-a-model-0123456789"
	tenantAApp    = "tenant-a-app-0123456789"
	tenantBClient = "tenant-b-client-0123456789"
	tenantBModel  = "tenant-b-model-0123456789"
	tenantBApp    = "tenant-b-app-0123456789"
	tenantOps     = "tenant-ops-0123456789"
)

// tenantKernel is a kernel serving WebSocket, MCP and the sessions API
// with two tenants' tokens and an operator, and an agent tool needing
// approval that counts its runs.
type tenantKernel struct {
	*fixture
	runs   *atomic.Int32
	tokens *server.Tokens
}

// tenantTokens are a tenantKernel's tokens.
func tenantTokens() []server.Token {
	return []server.Token{
		{Token: tenantAClient, Side: "client", Tenant: "a"},
		{Token: tenantAModel, Side: "model", Tenant: "a"},
		{Token: tenantAApp, Side: "app", App: "cal", Tenant: "a"},
		{Token: tenantBClient, Side: "client", Tenant: "b"},
		{Token: tenantBModel, Side: "model", Tenant: "b"},
		{Token: tenantBApp, Side: "app", App: "cal", Tenant: "b"},
		{Token: tenantOps, Side: "operator", Name: "ada"},
	}
}

func newTenantKernel(t *testing.T) *tenantKernel {
	t.Helper()
	tokens, err := server.NewTokens(tenantTokens()...)
	if err != nil {
		t.Fatal(err)
	}
	runs := &atomic.Int32{}
	mgr := server.NewManager(server.ManagerOptions{Attach: func(s *session.Session) error {
		return s.RegisterAgent(protocol.Capability{Name: "fs.write", Description: "Write a file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
			Side:        protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}, RequiresApproval: true,
			Audience: []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}},
			session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
				runs.Add(1)
				return c.Input, nil
			}))
	}})
	mcpH := mcpbridge.Handler(nil, nil)
	t.Cleanup(func() { _ = mcpH.Close() })
	ts := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr, MCP: mcpH.Endpoint}))
	t.Cleanup(ts.Close)
	return &tenantKernel{fixture: &fixture{t: t, srv: ts, mgr: mgr}, runs: runs, tokens: tokens}
}

// mcpAs connects an MCP client to session id with token, or returns the
// error.
func (k *tenantKernel) mcpAs(ctx context.Context, token, id string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "tenancy-test", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: k.srv.URL + "/v1/sessions/" + id + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// post sends body to path with token and returns the status and body.
func (k *tenantKernel) post(path, token, body string) (int, string) {
	k.t.Helper()
	req, _ := http.NewRequest("POST", k.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func frameJSON(t *testing.T, m protocol.Message) string {
	t.Helper()
	b, err := protocol.EncodeFrame(&protocol.Frame{ID: "f1", Msg: m})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTenancy: a session belongs to the tenant of the token that created
// it. Every surface tells another tenant's tokens it does not exist —
// the snapshot, the WebSocket (join and resume), frames over HTTP
// (invoke, approve, cancel), the conversation, MCP, listing and deleting —
// while its own tenant's tokens and operators reach it. These are the red
// team's findings, each of which succeeded before tenancy.
func TestTenancy(t *testing.T) {
	k := newTenantKernel(t)
	ctx := testutil.Context(t)

	// Tenant a's client creates "alice"; its model makes a call needing
	// approval over MCP.
	a := k.dial(tenantAClient, "alice", "")
	a.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeSnapshot })
	model, err := k.mcpAs(ctx, tenantAModel, "alice")
	if err != nil {
		t.Fatalf("tenant a's model on MCP: %v", err)
	}
	defer model.Close()
	result := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := model.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write", Arguments: map[string]any{"path": "secret.txt"}})
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		result <- r
	}()
	req := a.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeApprovalRequested }).Msg.(*protocol.ApprovalRequested)

	notFound := func(what string) func(int, string) {
		return func(status int, body string) {
			t.Helper()
			if status != http.StatusNotFound || !strings.Contains(body, "not_found") {
				t.Errorf("%s: %d %s, want 404 not_found", what, status, body)
			}
		}
	}
	t.Run("another tenant is told the session does not exist", func(t *testing.T) {
		for _, tok := range []string{tenantBClient, tenantBApp} {
			notFound("snapshot")(k.get("GET", "/v1/sessions/alice", tok))
			for _, q := range []string{"", "?after=0", "?after=3"} {
				notFound("WebSocket " + q)(k.dialStatusQuery(tok, "alice", q))
			}
		}
		notFound("conversation")(k.get("GET", "/v1/sessions/alice/conversation", tenantBClient))
		notFound("invoke over HTTP")(k.post("/v1/sessions/alice/frames", tenantBClient,
			frameJSON(t, &protocol.CapabilityInvoke{Name: "fs.write", Input: json.RawMessage(`{}`)})))
		notFound("approve over HTTP")(k.post("/v1/sessions/alice/frames", tenantBClient,
			frameJSON(t, &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "mallory", InputDigest: req.InputDigest})))
		notFound("cancel over HTTP")(k.post("/v1/sessions/alice/frames", tenantBClient,
			frameJSON(t, &protocol.CapabilityCancel{CallID: req.CallID})))
		notFound("delete")(k.get("DELETE", "/v1/sessions/alice", tenantBClient))
		if _, err := k.mcpAs(ctx, tenantBModel, "alice"); err == nil || !(strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "Not Found")) {
			t.Errorf("tenant b's model on MCP: %v, want 404", err)
		}
		if status, body := k.get("GET", "/v1/sessions", tenantBClient); status != http.StatusOK || strings.Contains(body, "alice") {
			t.Errorf("tenant b's list: %d %s, want no alice", status, body)
		}
	})
	t.Run("the model side never decides, registers, answers or reads", func(t *testing.T) {
		status, body := k.post("/v1/sessions/alice/frames", tenantAModel,
			frameJSON(t, &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "model", InputDigest: req.InputDigest}))
		if status != http.StatusForbidden || !strings.Contains(body, "model token") {
			t.Errorf("the model approving over HTTP: %d %s, want 403", status, body)
		}
		for _, q := range []string{"", "?after=0"} {
			if status, body := k.dialStatusQuery(tenantAModel, "alice", q); status != http.StatusForbidden {
				t.Errorf("the model on the WebSocket%s: %d %s, want 403", q, status, body)
			}
		}
		for _, path := range []string{"/v1/sessions/alice", "/v1/sessions/alice/conversation", "/v1/sessions"} {
			if status, body := k.get("GET", path, tenantAModel); status != http.StatusForbidden {
				t.Errorf("the model reading %s: %d %s, want 403", path, status, body)
			}
		}
		if _, err := k.mcpAs(ctx, tenantAClient, "alice"); err == nil || !(strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "Forbidden")) {
			t.Errorf("a client token on MCP: %v, want 403 (the MCP endpoint takes model tokens)", err)
		}
	})
	if n := k.runs.Load(); n != 0 {
		t.Fatalf("the tool ran %d times before its tenant's client approved", n)
	}
	t.Run("its own tenant and operators reach it", func(t *testing.T) {
		if status, body := k.get("GET", "/v1/sessions/alice", tenantAApp); status != http.StatusOK {
			t.Errorf("tenant a's app reading: %d %s", status, body)
		}
		if status, body := k.get("GET", "/v1/sessions/alice", tenantOps); status != http.StatusOK {
			t.Errorf("the operator reading: %d %s", status, body)
		}
		if status, body := k.get("GET", "/v1/sessions", tenantAClient); status != http.StatusOK || !strings.Contains(body, `"id":"alice"`) {
			t.Errorf("tenant a's list: %d %s", status, body)
		}
	})
	a.send("ok", &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "alice", InputDigest: req.InputDigest})
	a.reply("ok")
	r := testutil.Recv(t, result, "the MCP caller's result")
	if r.IsError || k.runs.Load() != 1 {
		t.Fatalf("after tenant a's approval: %+v, runs %d", r, k.runs.Load())
	}
	// Tenant b's own session of another id is its own.
	b := k.dial(tenantBClient, "bob", "")
	b.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeSnapshot })
	notFound("tenant a reading tenant b's session")(k.get("GET", "/v1/sessions/bob", tenantAClient))
}

// TestExplicitCreate: POST /v1/sessions makes a session for the token's
// tenant (an id, or a generated one), refuses a taken id with 409, and is
// the only way back for a deleted session's id: a WebSocket join, a
// resume, a read and MCP all get 404 after the delete.
func TestExplicitCreate(t *testing.T) {
	k := newTenantKernel(t)
	ctx := testutil.Context(t)
	status, body := k.post("/v1/sessions", tenantAClient, `{"id":"c1"}`)
	if status != http.StatusCreated || !strings.Contains(body, `"id":"c1"`) {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body := k.post("/v1/sessions", tenantAClient, `{"id":"c1"}`); status != http.StatusConflict {
		t.Fatalf("create again: %d %s, want 409", status, body)
	}
	if status, body := k.post("/v1/sessions", tenantBClient, `{"id":"c1"}`); status != http.StatusConflict {
		t.Fatalf("another tenant creating a taken id: %d %s, want 409", status, body)
	}
	if status, body := k.post("/v1/sessions", tenantAClient, `{"id":"c1","x":1}`); status != http.StatusBadRequest {
		t.Fatalf("an unknown field: %d %s, want 400", status, body)
	}
	// The token in the query, as a WebSocket takes it, is told where it goes.
	if status, body := k.get("GET", "/v1/sessions?token="+tenantAClient, ""); status != http.StatusUnauthorized || !strings.Contains(body, "?token= is taken by WebSocket connections only") {
		t.Fatalf("?token= on the API: %d %s, want 401 saying where it goes", status, body)
	}
	// Two objects were taken for the first (a probe's), making c2.
	if status, body := k.post("/v1/sessions", tenantAClient, `{"id":"c2"} {"id":"c3"}`); status != http.StatusBadRequest || !strings.Contains(body, "after the JSON value") {
		t.Fatalf("two objects: %d %s, want 400", status, body)
	}
	if status, _ := k.get("GET", "/v1/sessions/c2", tenantAClient); status != http.StatusNotFound {
		t.Fatalf("the refused create made c2: %d", status)
	}
	// A key twice: the last was taken (the re-probe's made b10).
	if status, body := k.post("/v1/sessions", tenantAClient, `{"id":"a10","id":"b10"}`); status != http.StatusBadRequest || !strings.Contains(body, `the key \"id\" appears twice`) {
		t.Fatalf("a key twice: %d %s, want 400", status, body)
	}
	if status, _ := k.get("GET", "/v1/sessions/b10", tenantAClient); status != http.StatusNotFound {
		t.Fatalf("the refused create made b10: %d", status)
	}
	status, body = k.post("/v1/sessions", tenantAClient, ``)
	var gen struct{ ID string }
	if err := json.Unmarshal([]byte(body), &gen); status != http.StatusCreated || err != nil || len(gen.ID) < 32 {
		t.Fatalf("create with a generated id: %d %s", status, body)
	}
	if status, _ := k.get("GET", "/v1/sessions/"+gen.ID, tenantBClient); status != http.StatusNotFound {
		t.Fatalf("another tenant reads the generated session: %d", status)
	}

	if status, body := k.get("DELETE", "/v1/sessions/c1", tenantAClient); status != http.StatusOK {
		t.Fatalf("the owner deletes: %d %s", status, body)
	}
	for _, q := range []string{"", "?after=0", "?after=2"} {
		if status, body := k.dialStatusQuery(tenantAClient, "c1", q); status != http.StatusNotFound {
			t.Fatalf("WebSocket%s to a deleted session: %d %s, want 404", q, status, body)
		}
	}
	if status, body := k.get("GET", "/v1/sessions/c1", tenantAClient); status != http.StatusNotFound {
		t.Fatalf("read of a deleted session: %d %s", status, body)
	}
	if _, err := k.mcpAs(ctx, tenantAModel, "c1"); err == nil || !(strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "Not Found")) {
		t.Fatalf("MCP to a deleted session: %v, want 404", err)
	}
	if status, body := k.get("GET", "/v1/sessions/c1", tenantOps); status != http.StatusNotFound {
		t.Fatalf("the deleted session came back: %d %s", status, body)
	}
	if status, body := k.post("/v1/sessions", tenantAClient, `{"id":"c1"}`); status != http.StatusCreated {
		t.Fatalf("explicit create of a deleted id: %d %s", status, body)
	}
	c := k.dial(tenantAClient, "c1", "")
	c.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeSnapshot })
}

// TestSeedShapedApproveOverWebSocket: capability_approve exactly as
// spec/capabilities.d.ts defines it — callId, decision, feedback,
// decidedBy, and no inputDigest — approves over a real WebSocket, and the
// tool runs once (it was refused with invalid_request before).
func TestSeedShapedApproveOverWebSocket(t *testing.T) {
	k := newTenantKernel(t)
	ctx := testutil.Context(t)
	a := k.dial(tenantAClient, "seed", "")
	a.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeSnapshot })
	model, err := k.mcpAs(ctx, tenantAModel, "seed")
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	result := make(chan error, 1)
	go func() {
		r, err := model.CallTool(ctx, &mcp.CallToolParams{Name: "fs.write", Arguments: map[string]any{"path": "a.txt"}})
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error: %v", r.Content)
		}
		result <- err
	}()
	req := a.until(func(f *protocol.Frame) bool { return f.Msg.MessageType() == protocol.TypeApprovalRequested }).Msg.(*protocol.ApprovalRequested)
	a.sendRaw(`{"v":2,"id":"s1","msg":{"type":"capability_approve","callId":"` + req.CallID + `","decision":"approved","feedback":"fine","decidedBy":"user-42"}}`)
	if r := a.reply("s1"); r.Msg.MessageType() != protocol.TypeAck {
		t.Fatalf("the seed's approval: %+v", r.Msg)
	}
	if err := testutil.Recv(t, result, "the MCP result"); err != nil || k.runs.Load() != 1 {
		t.Fatalf("after the approval: %v, runs %d", err, k.runs.Load())
	}
}

// TestDeleteIsFinal: deleting a session shows each of its WebSocket peers
// the cancellation of every waiting call, then closes them with 4404 and a
// reason (a client does not reconnect on it); the session's id is not
// created again by a reconnect.
func TestDeleteIsFinal(t *testing.T) {
	k := newTenantKernel(t)
	c := k.dial(tenantAClient, "doomed", "")
	c.until(ofType(protocol.TypeSnapshot))
	c.send("i", &protocol.CapabilityInvoke{Name: "fs.write", Input: json.RawMessage(`{"path":"a"}`)})
	// The ack and the approval's request, in either order: the request is
	// an event, and the writer may send it before the reply (waiting for
	// it after the ack waited 10 s for a frame already read, 1 run in
	// about 300 under -race).
	var id, requested string
	for id == "" || requested == "" {
		switch f := c.next(); m := f.Msg.(type) {
		case *protocol.Ack:
			if f.Ref == "i" {
				id = m.CallID
			}
		case *protocol.ApprovalRequested:
			requested = m.CallID
		}
	}
	if requested != id {
		t.Fatalf("approval requested for %q, want the call %q", requested, id)
	}
	if status, body := k.get("DELETE", "/v1/sessions/doomed", tenantAClient); status != http.StatusOK {
		t.Fatalf("delete: %d %s", status, body)
	}
	out := c.until(ofType(protocol.TypeCapabilityOutcome)).Msg.(*protocol.CapabilityOutcome)
	if out.CallID != id || out.Outcome.Err == nil || out.Outcome.Err.Code != protocol.CodeCancelled {
		t.Fatalf("the waiting call ended %+v, want cancelled", out.Outcome)
	}
	_, _, err := c.conn.Read(c.ctx)
	if websocket.CloseStatus(err) != server.StatusSessionDeleted || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("the connection ended with %v, want 4404 naming the delete", err)
	}
	if status, _ := k.dialStatusQuery(tenantAClient, "doomed", ""); status != http.StatusNotFound {
		t.Fatalf("a reconnect to the deleted session: %d, want 404", status)
	}
	// Another tenant joining the deleted id, and one joining a live
	// session of tenant a, are told alike: no tenant learns which ids
	// another deleted (a probe was told "session zz-y was deleted").
	k.dial(tenantAClient, "alive", "").until(ofType(protocol.TypeSnapshot))
	_, deleted := k.dialStatusQuery(tenantBClient, "doomed", "")
	_, others := k.dialStatusQuery(tenantBClient, "alive", "")
	if deleted != strings.ReplaceAll(others, "alive", "doomed") || !strings.Contains(deleted, "another tenant's, or its session was deleted") {
		t.Fatalf("tenant b joining a deleted id: %s; joining tenant a's: %s — want the same answer", deleted, others)
	}
	for _, id := range []string{"doomed", "alive"} {
		if status, body := k.post("/v1/sessions/"+id+"/mcp", tenantBModel, initializeBody); status != http.StatusNotFound || !strings.Contains(body, "another tenant's, or its session was deleted") {
			t.Errorf("tenant b's MCP initialize of %s: %d %s, want the same answer", id, status, body)
		}
	}
}
