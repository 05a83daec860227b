package driver

import (
	"context"
	"encoding/json"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Model is one model behind a provider's API. Step sends one request and
// streams the answer, passing each piece of text to onText as it arrives
// and calling [Request.Progress] for every chunk the stream yields (the
// driver's idle timeout counts from the last). On failure it returns what
// arrived so far with the error; a provider error must never contain the
// API key.
type Model interface {
	Step(ctx context.Context, req *Request, onText func(string)) (*Reply, error)
}

// Request is one model step: the system prompt, the conversation so far
// and the tools. Tools carry provider-safe names; Messages carry the
// capabilities' own names, which [Request.ToolName] maps. Messages and
// Tools are shared with the driver, the session and other steps (a step
// whose session's registry is unchanged gets the last step's Tools): read
// them, never modify them.
type Request struct {
	System   string
	Messages []protocol.ChatMessage
	Tools    []Tool

	names   *nameMap
	sess    *session.Session // set by the driver for ToolCallDelta (render_stream.go)
	secrets []string         // taken out of what streams (redact.go)
	alive   func()           // Progress: the idle timer starts again
	streams []toolStream     // by tool call index; nil until a delta arrives
}

// ToolName returns the provider-safe name of a capability named in
// Messages (see docs/agent.md, "Tool names").
func (r *Request) ToolName(capability string) string {
	if r.names == nil {
		return capability
	}
	return r.names.wire(capability)
}

// Tool is one tool offered to the model.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Reply is the model's answer to one step: its text and its tool calls
// (Input is the arguments text as the model produced it, valid JSON or
// not). The driver keeps what Step returns, without copying it: a model
// must not modify a Reply, or the bytes of its calls' Input, once Step has
// returned it.
type Reply struct {
	Text      string
	ToolCalls []protocol.ToolCall
	// Usage is the token usage the provider reported for the step; nil
	// when it reported none.
	Usage *protocol.Usage
}

// Progress tells the driver the stream yielded a chunk: the step's idle
// timeout starts again. A model calls it for every chunk it reads.
func (r *Request) Progress() {
	if r.alive != nil {
		r.alive()
	}
}
