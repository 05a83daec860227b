package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// An MCP client lists a session's llm-audience capabilities as tools and
// calls one; an error outcome reaches the model as an isError result.
func ExampleNewServer() {
	ctx := context.Background()
	s := session.New("demo", nil)
	_ = s.RegisterAgent(protocol.Capability{
		Name:        "math.add",
		Description: "Add two numbers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		Side:        protocol.SideAgent,
		Origin:      protocol.Origin{Kind: protocol.OriginAgent},
		Kind:        protocol.KindQuery,
	}, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		var in struct{ A, B float64 }
		if err := json.Unmarshal(c.Input, &in); err != nil {
			return nil, err
		}
		return json.Marshal(in.A + in.B)
	}))

	srv := mcpbridge.NewServer(s, nil)
	defer srv.Close()
	st, ct := mcp.NewInMemoryTransports()
	ss, _ := srv.MCP().Connect(ctx, st, nil)
	defer ss.Wait()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()

	tools, _ := cs.ListTools(ctx, nil)
	for _, t := range tools.Tools {
		fmt.Println(t.Name, "readOnly:", t.Annotations != nil && t.Annotations.ReadOnlyHint)
	}
	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "math.add", Arguments: map[string]any{"a": 2, "b": 3}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "math.add", Arguments: map[string]any{"a": 2}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// __capabilities.list readOnly: true
	// math.add readOnly: true
	// false 5
	// true invalid_input: input for "math.add" is invalid: at "/": missing property 'b'
}

// An external MCP server's tools become capabilities "<serverId>.<tool>".
func ExampleImport() {
	type greetIn struct {
		Name string `json:"name"`
	}
	type greetOut struct {
		Greeting string `json:"greeting"`
	}
	external := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "v0"}, nil)
	mcp.AddTool(external, &mcp.Tool{Name: "greet", Description: "Greet someone."},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
			return nil, greetOut{Greeting: "hello, " + in.Name}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return external }, nil))
	defer ts.Close()

	ctx := context.Background()
	s := session.New("demo", nil)
	im, err := mcpbridge.Import(ctx, s, mcpbridge.ServerConfig{ID: "greeter", URL: ts.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer im.Close()
	fmt.Println(im.Names())
	c, _ := s.Lookup("greeter.greet")
	fmt.Println(c.Origin, c.Side)
	out := s.Invoke(ctx, protocol.AudienceLLM, "greeter.greet", json.RawMessage(`{"name":"ada"}`))
	fmt.Println(string(out.Value))
	// Output:
	// [greeter.greet]
	// mcp/greeter agent
	// {"greeting":"hello, ada"}
}

// Relay bridges a host on stdio to a session's Streamable HTTP endpoint,
// as `brain mcp --url` does: here the host is three lines of JSON-RPC.
func ExampleRelay() {
	s := session.New("demo", nil)
	h := mcpbridge.Handler(nil, nil)
	defer h.Close()
	ts := httptest.NewServer(h.Endpoint(s))
	defer ts.Close()

	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`)
	var out strings.Builder
	if err := mcpbridge.Relay(context.Background(), ts.URL, in, &out, nil); err != nil {
		fmt.Println(err)
	}
	for line := range strings.Lines(out.String()) {
		var m struct {
			ID     int `json:"id"`
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(line), &m)
		if m.ID == 2 {
			fmt.Println(m.Result.Tools[0].Name)
		}
	}
	// Output: __capabilities.list
}
