package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// newExternalServer is the MCP server the import tests import: a go-sdk
// server whose tools add, fail (a tool error), broken (a protocol error),
// grow and shrink (add and remove the tool "extra", so that the server sends
// list_changed), "has space" (a name the session refuses) and, when
// standalone (its own process), exit.
func newExternalServer(standalone bool) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "external", Version: "v0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Add two integers.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Add"}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("boom")
		})
	srv.AddTool(&mcp.Tool{Name: "broken", Description: "Answers with a protocol error.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("kaput")
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "grow", Description: "Adds the tool extra."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			srv.AddTool(&mcp.Tool{Name: "extra", Description: "Appeared later.", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "extra here"}}}, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "shrink", Description: "Removes the tool extra."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			srv.RemoveTools("extra")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "shrunk"}}}, nil, nil
		})
	// A name the session refuses (a space): the import leaves it out.
	srv.AddTool(&mcp.Tool{Name: "has space", Description: "Not importable.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	if standalone {
		mcp.AddTool(srv, &mcp.Tool{Name: "exit", Description: "Ends the server's process mid-call."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				os.Exit(3)
				return nil, nil, nil
			})
	}
	return srv
}

// external is a way to reach the external server.
type external struct {
	name   string
	config func(t testing.TB) mcpbridge.ServerConfig
	exits  bool // the server has the tool exit
}

var externals = []external{
	{name: "http", config: func(t testing.TB) mcpbridge.ServerConfig {
		srv := newExternalServer(false)
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		return mcpbridge.ServerConfig{ID: "ext", URL: ts.URL}
	}},
	{name: "stdio", exits: true, config: func(t testing.TB) mcpbridge.ServerConfig {
		exe, err := os.Executable()
		must(t, err)
		return mcpbridge.ServerConfig{ID: "ext", Command: []string{exe}, Env: []string{serverEnv + "=1"}}
	}},
}

func TestImport(t *testing.T) {
	for _, ext := range externals {
		t.Run(ext.name, func(t *testing.T) {
			s := session.New("imp", nil)
			im, err := mcpbridge.Import(waitCtx(t), s, ext.config(t))
			must(t, err)
			t.Cleanup(func() { _ = im.Close() })
			sub := s.Subscribe(s.LastSeq())
			defer sub.Close()
			ctx := waitCtx(t)

			want := []string{"ext.add", "ext.broken", "ext.fail", "ext.grow", "ext.shrink"}
			if ext.exits {
				want = append(want, "ext.exit")
				slices.Sort(want)
			}
			if got := im.Names(); !slices.Equal(got, want) {
				t.Fatalf("Names = %v, want %v", got, want)
			}

			t.Run("registration", func(t *testing.T) {
				add, ok := s.Lookup("ext.add")
				if !ok {
					t.Fatal("ext.add is not registered")
				}
				if add.Origin != (protocol.Origin{Kind: protocol.OriginMCP, ID: "ext"}) || add.Side != protocol.SideAgent {
					t.Errorf("origin %v, side %v", add.Origin, add.Side)
				}
				if add.Kind != protocol.KindQuery || add.DisplayName != "Add" || add.Description != "Add two integers." {
					t.Errorf("kind %q, displayName %q, description %q", add.Kind, add.DisplayName, add.Description)
				}
				if add.OutputSchema == nil {
					t.Error("ext.add has no outputSchema")
				}
				if fail, _ := s.Lookup("ext.fail"); fail.Kind != protocol.KindEffect {
					t.Errorf("ext.fail kind = %q, want effect", fail.Kind)
				}
			})

			t.Run("calls", func(t *testing.T) {
				cases := []struct {
					name, capability, input string
					wantValue               string
					wantCode                protocol.Code
					wantMessage             string // a substring
				}{
					{name: "value", capability: "ext.add", input: `{"a":2,"b":3}`, wantValue: `{"sum":5}`},
					{name: "text value", capability: "ext.grow", input: `{}`, wantValue: `"grown"`},
					{name: "isError", capability: "ext.fail", input: `{}`, wantCode: protocol.CodeToolError, wantMessage: "boom"},
					{name: "protocol error", capability: "ext.broken", input: `{}`, wantCode: protocol.CodeToolError, wantMessage: "kaput"},
					{name: "invalid input", capability: "ext.add", input: `{"a":"two"}`, wantCode: protocol.CodeInvalidInput, wantMessage: "/a"},
				}
				for _, c := range cases {
					t.Run(c.name, func(t *testing.T) {
						out := s.Invoke(ctx, protocol.AudienceLLM, c.capability, json.RawMessage(c.input))
						switch {
						case c.wantCode == "" && out.Err != nil:
							t.Fatalf("outcome = %v", out.Err)
						case c.wantCode == "" && !jsonEqual(t, out.Value, c.wantValue):
							t.Fatalf("value = %s, want %s", out.Value, c.wantValue)
						case c.wantCode != "" && (out.Err == nil || out.Err.Code != c.wantCode || !strings.Contains(out.Err.Message, c.wantMessage)):
							t.Fatalf("outcome = %+v %v, want %s containing %q", out.Value, out.Err, c.wantCode, c.wantMessage)
						}
					})
				}
			})

			t.Run("list_changed", func(t *testing.T) {
				// The server adds extra and says so (ext.grow may have run above:
				// adding it again changes nothing here).
				if out := s.Invoke(ctx, protocol.AudienceLLM, "ext.grow", nil); out.Err != nil {
					t.Fatal(out.Err)
				}
				waitEvent(t, sub, "ext.extra's registration", registered("ext.extra"))
				if out := s.Invoke(ctx, protocol.AudienceLLM, "ext.extra", nil); out.Err != nil || string(out.Value) != `"extra here"` {
					t.Fatalf("ext.extra = %s %v", out.Value, out.Err)
				}
				if out := s.Invoke(ctx, protocol.AudienceLLM, "ext.shrink", nil); out.Err != nil {
					t.Fatal(out.Err)
				}
				waitEvent(t, sub, "ext.extra's deregistration", deregistered("ext.extra"))
				if _, ok := s.Lookup("ext.extra"); ok {
					t.Fatal("ext.extra is still registered")
				}
			})

			if ext.exits {
				t.Run("server exits", func(t *testing.T) {
					out := s.Invoke(ctx, protocol.AudienceLLM, "ext.exit", nil)
					if out.Err == nil || out.Err.Code != protocol.CodeUnavailable {
						t.Fatalf("outcome = %s %v, want unavailable", out.Value, out.Err)
					}
					waitEvent(t, sub, "the deregistration of a dead server's tools", deregistered("ext.add"))
					if got := im.Names(); len(got) != 0 {
						t.Errorf("Names = %v after the server exited", got)
					}
				})
				return
			}

			t.Run("close", func(t *testing.T) {
				must(t, im.Close())
				waitEvent(t, sub, "the deregistration at Close", deregistered("ext.add"))
				for _, n := range want {
					if _, ok := s.Lookup(n); ok {
						t.Errorf("%s is registered after Close", n)
					}
				}
				must(t, im.Close()) // twice is fine
			})
		})
	}
}

func TestImportRefused(t *testing.T) {
	notMCP := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notMCP.Close)
	cases := []struct {
		name string
		cfg  mcpbridge.ServerConfig
		want string
	}{
		{"no id", mcpbridge.ServerConfig{URL: notMCP.URL}, "no ID"},
		{"id with a space", mcpbridge.ServerConfig{ID: "a b", URL: notMCP.URL}, "spaces"},
		{"neither", mcpbridge.ServerConfig{ID: "x"}, "exactly one"},
		{"both", mcpbridge.ServerConfig{ID: "x", URL: notMCP.URL, Command: []string{"true"}}, "exactly one"},
		{"not http", mcpbridge.ServerConfig{ID: "x", URL: "file:///etc/passwd"}, "not http"},
		{"no such program", mcpbridge.ServerConfig{ID: "x", Command: []string{"/nonexistent/mcp-server"}}, "connect"},
		{"not an MCP endpoint", mcpbridge.ServerConfig{ID: "x", URL: notMCP.URL}, "connect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := session.New("imp", nil)
			before := len(s.List(protocol.AudienceRuntime))
			im, err := mcpbridge.Import(waitCtx(t), s, c.cfg)
			if err == nil {
				_ = im.Close()
				t.Fatal("Import succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to mention %q", err, c.want)
			}
			if after := len(s.List(protocol.AudienceRuntime)); after != before {
				t.Errorf("the session changed: %d capabilities, then %d", before, after)
			}
		})
	}
}

// Two imports of one server under different IDs coexist; a name taken by
// another origin is left out, and the rest is imported.
func TestImportNameConflict(t *testing.T) {
	s := session.New("imp", nil)
	taken := agentCap("ext.add")
	must(t, s.RegisterAgent(taken, returns(`0`, nil)))
	cfg := externals[0].config(t)
	im, err := mcpbridge.Import(waitCtx(t), s, cfg)
	must(t, err)
	t.Cleanup(func() { _ = im.Close() })
	if slices.Contains(im.Names(), "ext.add") {
		t.Fatalf("Names = %v: ext.add is held by origin agent", im.Names())
	}
	if c, _ := s.Lookup("ext.add"); c.Origin.Kind != protocol.OriginAgent {
		t.Fatalf("ext.add was replaced: origin %v", c.Origin)
	}
	cfg.ID = "ext2"
	im2, err := mcpbridge.Import(waitCtx(t), s, cfg)
	must(t, err)
	t.Cleanup(func() { _ = im2.Close() })
	if out := s.Invoke(waitCtx(t), protocol.AudienceLLM, "ext2.add", json.RawMessage(`{"a":1,"b":1}`)); out.Err != nil || !jsonEqual(t, out.Value, `{"sum":2}`) {
		t.Fatalf("ext2.add = %s %v", out.Value, out.Err)
	}
}
