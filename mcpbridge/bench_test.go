package mcpbridge_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/session"
)

// echoIn is the anchors' EchoIn: the client marshals it as the arguments.
type echoIn struct {
	Text string `json:"text"`
}

// benchCallTool measures one tools/call of the agent-side echo capability
// through the export: the client marshals the request, the SDK server
// decodes it, the session's bridge validates the input against the
// capability's schema, runs the handler on a worker, checks the result
// against the outputSchema and publishes the call's events; the export maps
// the outcome onto text and structured content, and the client decodes the
// response. Compare with ../shared/anchors' BenchmarkMCPGoSDKCallTool (the
// SDK's typed AddTool over the same in-memory transport).
func benchCallTool(b *testing.B, connect func(testing.TB, *session.Session, *mcp.ClientOptions) *mcp.ClientSession) {
	s := session.New("bench", nil)
	must(b, s.RegisterAgent(echoCap(), echoHandler))
	cs := connect(b, s, nil)
	ctx := context.Background()
	want := `{"Text":"` + echoText + `"}`
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: echoIn{Text: echoText}})
		if err != nil || res.IsError {
			b.Fatalf("CallTool: %v, %+v", err, res)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != want {
			b.Fatalf("text = %q", got)
		}
	}
}

// BenchmarkMCPCallTool: over the SDK's in-memory transports.
func BenchmarkMCPCallTool(b *testing.B) { benchCallTool(b, connectInMemory) }

// BenchmarkMCPCallToolHTTP: over Streamable HTTP on loopback, through
// Handler (one POST with an SSE response per call).
func BenchmarkMCPCallToolHTTP(b *testing.B) { benchCallTool(b, connectHTTP) }
