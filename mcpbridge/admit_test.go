package mcpbridge_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestAdmit: a call Admit refuses ends at once with Admit's error as an
// isError result, and the capability does not run; once Admit lets calls
// through again, they run.
func TestAdmit(t *testing.T) {
	s := session.New("adm", nil)
	var runs atomic.Int32
	must(t, s.RegisterAgent(agentCap("work"), session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`"done"`), nil
	})))
	var full atomic.Bool
	full.Store(true)
	srv := mcpbridge.NewServer(s, &mcpbridge.ServerOptions{Admit: func(got *session.Session) *protocol.Error {
		if got != s {
			t.Errorf("Admit asked about session %s", got.ID())
		}
		if full.Load() {
			return protocol.Errorf(protocol.CodeQuotaExceeded, "session adm has journaled 600 bytes, its limit")
		}
		return nil
	}})
	t.Cleanup(func() { _ = srv.Close() })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(waitCtx(t), st, nil)
	must(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(waitCtx(t), ct, nil)
	must(t, err)
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })

	res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}})
	must(t, err)
	if got := text(t, res); !res.IsError || !strings.HasPrefix(got, "quota_exceeded: session adm") {
		t.Fatalf("refused call: %q (isError %v)", got, res.IsError)
	}
	if runs.Load() != 0 {
		t.Fatal("a refused call ran")
	}
	full.Store(false)
	res, err = cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}})
	must(t, err)
	if got := text(t, res); res.IsError || got != `"done"` || runs.Load() != 1 {
		t.Fatalf("admitted call: %q (isError %v), runs %d", got, res.IsError, runs.Load())
	}
}

// TestBuiltinListedAndHints: the session's built-in __capabilities.list is
// an MCP tool like any llm-audience capability, and the only annotation
// the export sets is readOnlyHint (kind query): no idempotentHint,
// destructiveHint or openWorldHint, whose MCP defaults then apply.
func TestBuiltinListedAndHints(t *testing.T) {
	f := newFixture(t)
	cs := connectInMemory(t, f.s, nil)
	tools := toolNames(t, cs)
	lt := tools[session.CapabilitiesListName]
	if lt == nil {
		t.Fatalf("%s is not listed: %v", session.CapabilitiesListName, tools)
	}
	res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: session.CapabilitiesListName, Arguments: map[string]any{}})
	must(t, err)
	if res.IsError || !strings.Contains(text(t, res), "notes.search") {
		t.Fatalf("%s: %q", session.CapabilitiesListName, text(t, res))
	}
	for name, tool := range tools {
		a := tool.Annotations
		if a == nil {
			continue
		}
		if a.IdempotentHint || a.DestructiveHint != nil || a.OpenWorldHint != nil {
			t.Errorf("%s has annotations %+v beyond readOnlyHint", name, a)
		}
	}
	if a := tools["notes.search"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("a query capability lacks readOnlyHint: %+v", a)
	}
}
