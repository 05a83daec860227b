package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

func toolNames(t testing.TB, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(waitCtx(t), nil) {
		must(t, err)
		out[tool.Name] = tool
	}
	return out
}

func TestExportListTools(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t)
			cs := tr.connect(t, f.s, nil)
			tools := toolNames(t, cs)

			var names []string
			for n := range tools {
				names = append(names, n)
			}
			slices.Sort(names)
			want := []string{session.CapabilitiesListName, "block", "danger", "echo", "fail", "notes.search", "platform.react"}
			if !slices.Equal(names, want) {
				t.Fatalf("tools = %v, want %v (runtime- and user-only capabilities absent)", names, want)
			}

			echo := tools["echo"]
			if echo.Description != "Echo the text back." {
				t.Errorf("echo description = %q", echo.Description)
			}
			if !jsonEqual(t, echo.InputSchema, echoSchema) {
				t.Errorf("echo inputSchema = %v, want %s", echo.InputSchema, echoSchema)
			}
			if !jsonEqual(t, echo.OutputSchema, echoCap().OutputSchema) {
				t.Errorf("echo outputSchema = %v", echo.OutputSchema)
			}
			if echo.Annotations != nil && echo.Annotations.ReadOnlyHint {
				t.Errorf("echo (no kind) is read-only: %+v", echo.Annotations)
			}
			if a := tools["notes.search"].Annotations; a == nil || !a.ReadOnlyHint {
				t.Errorf("notes.search (kind query) annotations = %+v, want readOnlyHint", a)
			}
			if tools["fail"].OutputSchema != nil {
				t.Errorf("fail has an outputSchema: %v", tools["fail"].OutputSchema)
			}
		})
	}
}

func TestExportCallTool(t *testing.T) {
	cases := []struct {
		name       string
		tool       string
		args       any
		wantText   string // exact, or a prefix when wantPrefix
		wantPrefix bool
		wantError  bool
		structured bool
	}{
		{name: "value object", tool: "echo", args: map[string]any{"text": "hi"}, wantText: `{"Text":"hi"}`, structured: true},
		{name: "value array", tool: "notes.search", args: map[string]any{}, wantText: `["a","b"]`},
		{name: "tool error code", tool: "fail", args: map[string]any{}, wantText: "rate_limited: slow down", wantError: true},
		{name: "invalid input", tool: "echo", args: map[string]any{"text": 1}, wantText: "invalid_input: ", wantPrefix: true, wantError: true},
		{name: "built-in list", tool: session.CapabilitiesListName, args: map[string]any{"prefix": "notes."}, wantText: `{"capabilities":[{"name":"notes.search"`, wantPrefix: true, structured: true},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t)
			cs := tr.connect(t, f.s, nil)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
					must(t, err)
					got := text(t, res)
					if c.wantPrefix && !strings.HasPrefix(got, c.wantText) || !c.wantPrefix && got != c.wantText {
						t.Errorf("text = %q, want %q", got, c.wantText)
					}
					if res.IsError != c.wantError {
						t.Errorf("isError = %v, want %v", res.IsError, c.wantError)
					}
					if got := res.StructuredContent != nil; got != c.structured {
						t.Errorf("structuredContent = %v, want it set: %v", res.StructuredContent, c.structured)
					} else if got && !jsonEqual(t, res.StructuredContent, text(t, res)) {
						t.Errorf("structuredContent %v differs from the text %s", res.StructuredContent, text(t, res))
					}
				})
			}
			t.Run("unknown tool", func(t *testing.T) {
				// The SDK answers a name it does not list with a protocol error.
				_, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
				if err == nil || !strings.Contains(err.Error(), "nope") {
					t.Fatalf("err = %v, want unknown tool", err)
				}
			})
		})
	}
}

func TestExportApproval(t *testing.T) {
	cases := []struct {
		name     string
		decision protocol.Decision
		feedback string
		wantText string
		wantErr  bool
		wantRuns int32
	}{
		{"approved", protocol.DecisionApproved, "", `{"done":true}`, false, 1},
		{"rejected", protocol.DecisionRejected, "not now", "rejected: the user (ada) rejected the call: not now", true, 0},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					f := newFixture(t)
					cs := tr.connect(t, f.s, nil)
					sub := f.s.Subscribe(f.s.LastSeq())
					defer sub.Close()

					type answer struct {
						res *mcp.CallToolResult
						err error
					}
					done := make(chan answer, 1)
					go func() {
						res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{"why": "test"}})
						done <- answer{res, err}
					}()

					req := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool {
						_, ok := m.(*protocol.ApprovalRequested)
						return ok
					}).(*protocol.ApprovalRequested)
					if req.Name != "danger" || req.Invoker != protocol.AudienceLLM {
						t.Fatalf("approval_requested = %+v", req)
					}
					select {
					case a := <-done:
						t.Fatalf("the call finished before the decision: %+v, %v", a.res, a.err)
					default:
					}
					if n := f.runs.Load(); n != 0 {
						t.Fatalf("the handler ran %d times before approval", n)
					}

					must(t, f.s.Approve(session.Client, &protocol.CapabilityApprove{
						CallID: req.CallID, Decision: c.decision, Feedback: c.feedback, DecidedBy: "ada", InputDigest: req.InputDigest,
					}))
					a := recv(t, done, "the call's result")
					must(t, a.err)
					if got := text(t, a.res); got != c.wantText || a.res.IsError != c.wantErr {
						t.Errorf("result = %q (isError %v), want %q (isError %v)", got, a.res.IsError, c.wantText, c.wantErr)
					}
					if n := f.runs.Load(); n != c.wantRuns {
						t.Errorf("the handler ran %d times, want %d", n, c.wantRuns)
					}
				})
			}
		})
	}
}

func TestExportClientSideCapability(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t)
			cs := tr.connect(t, f.s, nil)
			sub := f.s.Subscribe(f.s.LastSeq())
			defer sub.Close()

			// The host platform: answer capability_invoked with a result.
			answered := make(chan error, 1)
			go func() {
				ctx := waitCtx(t)
				for {
					ev, err := sub.Next(ctx)
					if err != nil {
						answered <- err
						return
					}
					if inv, ok := ev.Msg.(*protocol.CapabilityInvoked); ok && inv.Name == "platform.react" {
						answered <- f.s.Result(session.Client, &protocol.CapabilityResult{
							CallID: inv.CallID, Result: json.RawMessage(`{"shown":true}`),
						})
						return
					}
				}
			}()

			res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "platform.react", Arguments: map[string]any{"emoji": "👍"}})
			must(t, err)
			must(t, recv(t, answered, "the client's answer"))
			if got := text(t, res); got != `{"shown":true}` || res.IsError {
				t.Fatalf("result = %q (isError %v)", got, res.IsError)
			}
		})
	}
}

func TestExportListChanged(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t)
			changed := make(chan struct{}, 16)
			cs := tr.connect(t, f.s, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			if _, ok := toolNames(t, cs)["late"]; ok {
				t.Fatal("late is listed before it is registered")
			}

			late := agentCap("late")
			late.Kind = protocol.KindQuery
			must(t, f.s.RegisterAgent(late, returns(`"here"`, nil)))
			recv(t, changed, "tools/list_changed after a registration")
			tool, ok := toolNames(t, cs)["late"]
			if !ok {
				t.Fatal("late is not listed after list_changed")
			}
			if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
				t.Errorf("late annotations = %+v", tool.Annotations)
			}
			res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "late", Arguments: map[string]any{}})
			must(t, err)
			if got := text(t, res); got != `"here"` {
				t.Errorf("late = %q", got)
			}

			// Re-registered for the runtime only, it leaves the LLM's list.
			late.Audience = []protocol.Audience{protocol.AudienceRuntime}
			must(t, f.s.RegisterAgent(late, returns(`"here"`, nil)))
			recv(t, changed, "tools/list_changed after a change of audience")
			if _, ok := toolNames(t, cs)["late"]; ok {
				t.Fatal("late is listed after its audience became runtime")
			}

			must(t, f.s.Deregister(session.Runtime, "echo"))
			recv(t, changed, "tools/list_changed after a deregistration")
			if _, ok := toolNames(t, cs)["echo"]; ok {
				t.Fatal("echo is listed after its deregistration")
			}
		})
	}
}

// A client that gives up cancels the call, and the handler's context ends.
func TestExportCancel(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t)
			cs := tr.connect(t, f.s, nil)
			sub := f.s.Subscribe(f.s.LastSeq())
			defer sub.Close()

			ctx, cancel := context.WithCancel(waitCtx(t))
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
				done <- err
			}()
			recv(t, f.blocked, "the handler to start")
			cancel()
			if err := recv(t, done, "CallTool to return"); !errors.Is(err, context.Canceled) {
				t.Fatalf("CallTool err = %v, want context.Canceled", err)
			}
			recv(t, f.cancelled, "the handler's context to end")
			out := waitEvent(t, sub, "the call's outcome", func(m protocol.Message) bool {
				o, ok := m.(*protocol.CapabilityOutcome)
				return ok && o.Name == "block"
			}).(*protocol.CapabilityOutcome)
			if out.Outcome.Err == nil || out.Outcome.Err.Code != protocol.CodeCancelled {
				t.Fatalf("outcome = %+v, want cancelled", out.Outcome)
			}
		})
	}
}

// How a capability's fields become a tool's.
func TestExportToolFields(t *testing.T) {
	cases := []struct {
		name  string
		cap   func(c *protocol.Capability)
		check func(t *testing.T, tool *mcp.Tool)
	}{
		{"untyped input schema gets type object", func(c *protocol.Capability) {
			c.InputSchema = json.RawMessage(`{"properties":{"x":{"type":"string"}}}`)
		}, func(t *testing.T, tool *mcp.Tool) {
			if !jsonEqual(t, tool.InputSchema, `{"type":"object","properties":{"x":{"type":"string"}}}`) {
				t.Errorf("inputSchema = %v", tool.InputSchema)
			}
		}},
		{"object output schema kept", func(c *protocol.Capability) {
			c.OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
		}, func(t *testing.T, tool *mcp.Tool) {
			if !jsonEqual(t, tool.OutputSchema, `{"type":"object","properties":{"n":{"type":"integer"}}}`) {
				t.Errorf("outputSchema = %v", tool.OutputSchema)
			}
		}},
		{"array output schema left out", func(c *protocol.Capability) {
			c.OutputSchema = json.RawMessage(`{"type":"array"}`)
		}, func(t *testing.T, tool *mcp.Tool) {
			if tool.OutputSchema != nil {
				t.Errorf("outputSchema = %v, want none", tool.OutputSchema)
			}
		}},
		{"displayName and promptFragment", func(c *protocol.Capability) {
			c.DisplayName = "Do it"
			c.PromptFragment = "Use it sparingly."
		}, func(t *testing.T, tool *mcp.Tool) {
			if tool.Title != "Do it" || tool.Description != "Test capability x.\n\nUse it sparingly." {
				t.Errorf("title %q, description %q", tool.Title, tool.Description)
			}
		}},
		{"effect is not read-only", func(c *protocol.Capability) {
			c.Kind = protocol.KindEffect
		}, func(t *testing.T, tool *mcp.Tool) {
			if tool.Annotations != nil && tool.Annotations.ReadOnlyHint {
				t.Errorf("annotations = %+v", tool.Annotations)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := session.New("fields", nil)
			capability := agentCap("x")
			c.cap(&capability)
			must(t, s.RegisterAgent(capability, returns(`{}`, nil)))
			tool := toolNames(t, connectInMemory(t, s, nil))["x"]
			if tool == nil {
				t.Fatal("x is not listed")
			}
			c.check(t, tool)
		})
	}
}
