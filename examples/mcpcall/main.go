// Command mcpcall is an agent driver in a few lines: it connects to one
// session of brain serve over MCP (Streamable HTTP), lists the tools, and
// calls one. docs/serve.md walks through it.
//
//	go run ./examples/mcpcall -session demo -tool fs.read -args '{"path":"notes.txt"}'
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/examples/internal/token"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7777", "brain serve's address")
	sessionID := flag.String("session", "demo", "the session whose tools to use")
	tok := flag.String("token", "", "a model token (default: $BRAIN_TOKEN, else the model token in -data's tokens.json)")
	data := flag.String("data", "brain-data", "brain serve's data directory, to find the token")
	name := flag.String("tool", "", "the tool to call (default: only list the tools)")
	args := flag.String("args", "{}", "the call's arguments, a JSON object")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mcpcall: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(*args), &arguments); err != nil {
		fmt.Fprintf(os.Stderr, "mcpcall: -args is not a JSON object: %v\n", err)
		os.Exit(2)
	}
	t, err := token.Find(*tok, *data, "model")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpcall:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	isError, err := run(ctx, "http://"+*addr+"/v1/sessions/"+*sessionID+"/mcp", t, *name, arguments)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpcall:", err)
		os.Exit(1)
	}
	if isError {
		os.Exit(1)
	}
}

type bearer string

// RoundTrip sends r with the token. A refusal (401, 403, 404) becomes an
// error carrying the kernel's message — which says what to change — since
// the SDK reports only the status.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound) {
		return resp, err
	}
	defer resp.Body.Close()
	var refusal struct{ Message string }
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if json.Unmarshal(raw, &refusal) != nil || refusal.Message == "" {
		refusal.Message = strings.TrimSpace(string(raw))
	}
	return nil, fmt.Errorf("%s: %s", resp.Status, refusal.Message)
}

func run(ctx context.Context, endpoint, tok, name string, args map[string]any) (isError bool, err error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpcall", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearer(tok)}}, nil) // the SDK's retries: a stop closes the event stream as the last result goes out
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("list tools: %w", err)
	}
	fmt.Print("tools:")
	for _, t := range tools.Tools {
		fmt.Print(" ", t.Name)
	}
	fmt.Println()
	if name == "" {
		return false, nil
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return false, fmt.Errorf("call %s: %w", name, err)
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			fmt.Printf("%s → %s\n", name, tc.Text)
		}
	}
	if res.IsError {
		fmt.Printf("%s: the call ended in an error (isError)\n", name)
	}
	return res.IsError, nil
}
