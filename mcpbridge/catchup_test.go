package mcpbridge_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallRightAfterRegister: a capability is callable and listed over MCP
// as soon as its registration returns, without waiting for the tool list to
// catch up (it learns of registrations from the session's events).
func TestCallRightAfterRegister(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t)
			cs := tr.connect(t, f.s, nil)
			for i := range 30 {
				name := fmt.Sprintf("fresh.t%d", i)
				must(t, f.s.RegisterAgent(agentCap(name), returns(`{"ok":true}`, nil)))
				res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
				if err != nil {
					t.Fatalf("call %s right after registering it: %v", name, err)
				}
				if res.IsError {
					t.Fatalf("call %s: %s", name, text(t, res))
				}
				list, err := cs.ListTools(waitCtx(t), nil)
				must(t, err)
				if !slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == name }) {
					t.Fatalf("%s not listed right after registering it", name)
				}
			}
		})
	}
}
