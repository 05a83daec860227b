package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// storedKernel is tenantKernel's tokens over a real store (embedded NATS
// JetStream in dir), so that what a journal refuses is real.
func storedKernel(t *testing.T, dir string) (*tenantKernel, func()) {
	t.Helper()
	st, err := store.Open(testutil.Context(t), &store.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := server.NewTokens(
		server.Token{Token: tenantAClient, Side: "client", Tenant: "a"},
		server.Token{Token: tenantAModel, Side: "model", Tenant: "a"},
		server.Token{Token: tenantAApp, Side: "app", App: "cal", Tenant: "a"},
		server.Token{Token: tenantOps, Side: "operator", Name: "ada"},
	)
	if err != nil {
		t.Fatal(err)
	}
	runs := &atomic.Int32{}
	mgr := server.NewManager(server.ManagerOptions{Store: st, Attach: func(s *session.Session) error {
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
	ts := httptest.NewServer(server.New(server.Options{Tokens: tokens, Manager: mgr, MCP: mcpH.Endpoint}))
	k := &tenantKernel{fixture: &fixture{t: t, srv: ts, mgr: mgr}, runs: runs}
	return k, func() { ts.CloseClientConnections(); ts.Close(); _ = mcpH.Close(); _ = st.Close() }
}

// TestNoEventPoisonsTheJournal: the red team's oversized inputs — an app's
// result of about 1 MiB, 200 KB of "<" (six times that once JSON escapes
// it), MCP arguments of 2 MiB — are refused with too_large before anyone
// sees an event; the session's journal goes on storing (the next approval
// runs, it is not "could not be journaled"), and after a restart the
// session holds exactly the events its client saw.
func TestNoEventPoisonsTheJournal(t *testing.T) {
	dir := t.TempDir()
	k, stop := storedKernel(t, dir)
	// 2 MiB of MCP arguments are read, decoded and measured under the race
	// detector on a loaded machine: seconds, past testutil's 5 s; a minute
	// bounds a hang without flaking on load.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := k.dial(tenantAClient, "big", "?after=0")
	app := k.dial(tenantAApp, "big", "?after=0")
	big := appCapOf("cal", "cal.big")
	big.Audience = []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}
	app.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{big}})
	app.reply("r")

	answer := func(result string) (*protocol.Frame, *protocol.CapabilityOutcome) {
		t.Helper()
		c.send("i", &protocol.CapabilityInvoke{Name: "cal.big", Input: json.RawMessage(`{}`)})
		ack := c.reply("i").Msg.(*protocol.Ack)
		inv := app.until(ofType(protocol.TypeCapabilityInvoked)).Msg.(*protocol.CapabilityInvoked)
		app.sendRaw(`{"v":2,"id":"res","msg":{"type":"capability_result","callId":"` + inv.CallID + `","result":` + result + `}}`)
		reply := app.reply("res")
		out := c.until(func(f *protocol.Frame) bool {
			o, ok := f.Msg.(*protocol.CapabilityOutcome)
			return ok && o.CallID == ack.CallID
		}).Msg.(*protocol.CapabilityOutcome)
		return reply, out
	}
	for _, tc := range []struct{ name, result string }{
		{"a result of about 1 MiB", `"` + strings.Repeat("x", protocol.MaxFrameBytes-300) + `"`},
		{"200 KB of < (1.2 MB escaped)", `"` + strings.Repeat("<", 200_000) + `"`},
	} {
		reply, out := answer(tc.result)
		if e, ok := reply.Msg.(*protocol.ErrorReply); !ok || e.Code != protocol.CodeTooLarge {
			t.Fatalf("%s: the app's reply is %+v, want too_large", tc.name, reply.Msg)
		}
		if out.Outcome.Err == nil || out.Outcome.Err.Code != protocol.CodeTooLarge || !strings.Contains(out.Outcome.Err.Message, "over the limit") {
			t.Fatalf("%s: the outcome is %+v, want too_large naming the limit", tc.name, out.Outcome)
		}
	}

	// MCP arguments of 2 MiB.
	model, err := k.mcpAs(ctx, tenantAModel, "big")
	if err != nil {
		t.Fatal(err)
	}
	r, err := model.CallTool(ctx, &mcp.CallToolParams{Name: "cal.big", Arguments: map[string]any{"blob": strings.Repeat("y", 2<<20)}})
	switch {
	case err != nil:
		t.Logf("2 MiB of MCP arguments refused by the transport: %v", err) // nothing reached the session
	case !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "too_large"):
		t.Fatalf("2 MiB of MCP arguments: %+v, want a too_large error", r.Content)
	}
	_ = model.Close()

	// The journal still stores: a normal call, then an approval.
	if _, out := answer(`{"ok":1}`); !out.Outcome.IsOK() {
		t.Fatalf("a normal result after the refused ones: %+v", out.Outcome)
	}
	c.send("w", &protocol.CapabilityInvoke{Name: "fs.write", Input: json.RawMessage(`{"path":"a"}`)})
	// The ack and the approval request, in either order: the request is
	// an event of the invoke, and the writer may send it before the ack
	// (waiting for the ack first would skip it, and wait forever).
	var wid string
	var req *protocol.ApprovalRequested
	for wid == "" || req == nil {
		f := c.next()
		switch m := f.Msg.(type) {
		case *protocol.Ack:
			if f.Ref == "w" {
				wid = m.CallID
			}
		case *protocol.ApprovalRequested:
			req = m
		}
	}
	c.send("a", &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: req.InputDigest})
	// The ack and the outcome, in either order (the call may end before
	// the ack is written).
	var out *protocol.CapabilityOutcome
	for acked := false; !acked || out == nil; {
		f := c.next()
		switch m := f.Msg.(type) {
		case *protocol.CapabilityOutcome:
			if m.CallID == wid {
				out = m
			}
		default:
			if f.Ref == "a" {
				if f.Msg.MessageType() != protocol.TypeAck {
					t.Fatalf("the approval after the refused events: %+v", f.Msg)
				}
				acked = true
			}
		}
	}
	if !out.Outcome.IsOK() || k.runs.Load() != 1 {
		t.Fatalf("the approved call: %+v, runs %d", out.Outcome, k.runs.Load())
	}
	// Every event up to the session's last is the client's to see: read
	// up to it (the outcome may not be the last: Observe's events trail).
	c.send("p", &protocol.CapabilityDeregister{Names: []string{}})
	last := c.reply("p").Seq
	for c.seen < last {
		c.next()
	}
	seen := c.seen
	stop()

	// After a restart the session has exactly what the client saw.
	k2, stop2 := storedKernel(t, dir)
	defer stop2()
	status, body := k2.get("GET", "/v1/sessions/big", tenantAClient)
	var row struct{ Seq uint64 }
	if err := json.Unmarshal([]byte(body), &row); status != 200 || err != nil || row.Seq != seen {
		t.Fatalf("after the restart: %d %s, want seq %d", status, body, seen)
	}
}
