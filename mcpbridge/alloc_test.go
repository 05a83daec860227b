package mcpbridge_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/session"
)

// TestCallToolHTTPAllocatesLittle: a tools/call over Streamable HTTP —
// client and server together — allocates well under the 350 KB that
// go-sdk v1.8.0 unpatched spent copying each JSON message into a fresh
// 32 KiB buffer (third_party/go-sdk/BRAIN-PATCH.md). The bound leaves room
// for the HTTP stack; the patched path measures about 22 KB.
func TestCallToolHTTPAllocatesLittle(t *testing.T) {
	s := session.New("alloc", nil)
	must(t, s.RegisterAgent(echoCap(), echoHandler))
	cs := connectHTTP(t, s, nil)
	ctx := context.Background()
	call := func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: echoIn{Text: echoText}})
		if err != nil || res.IsError {
			t.Fatalf("CallTool: %v, %+v", err, res)
		}
	}
	call() // warm: connections, schema caches
	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		call()
	}
	runtime.ReadMemStats(&after)
	// TotalAlloc only grows; other goroutines of this test binary add to
	// it, never take away, so the bound can only be passed by allocating.
	perCall := (after.TotalAlloc - before.TotalAlloc) / n
	if perCall > 128<<10 {
		t.Fatalf("a tools/call allocates %d bytes, want under %d (has the go-sdk patch been lost?)", perCall, 128<<10)
	}
	t.Logf("%d bytes per tools/call", perCall)
}
