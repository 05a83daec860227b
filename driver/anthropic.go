//go:build !brain_nomodels

package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/brainrt/brain/protocol"
)

// anthropicModel speaks the Messages API.
type anthropicModel struct {
	client anthropic.Client
	opts   ProviderOptions
}

// NewAnthropic returns a model behind Anthropic's Messages API (at
// opts.BaseURL when set). Answers are streamed.
func NewAnthropic(opts ProviderOptions) (Model, error) {
	if opts.Model == "" {
		return nil, errors.New("anthropic: a model name is required")
	}
	ro := []option.RequestOption{option.WithAPIKey(opts.APIKey), option.WithMaxRetries(opts.retries())}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	return &anthropicModel{client: anthropic.NewClient(ro...), opts: opts}, nil
}

func (m *anthropicModel) Step(ctx context.Context, req *Request, onText func(string)) (*Reply, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.opts.Model),
		MaxTokens: m.opts.maxTokens(),
		Messages:  anthropicMessages(req),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		tp := anthropic.ToolParam{
			Name: t.Name,
			// The schema goes out byte for byte as registered.
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](json.RawMessage(t.InputSchema)),
		}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	var text strings.Builder
	reply := &Reply{}
	stopped := false
	type toolBlock struct {
		i    int // the call's index in the reply's tool calls
		name string
	}
	tools := map[int64]toolBlock{} // by content block index, for ToolCallDelta
	size := 0
	for stream.Next() {
		req.Progress() // a chunk: the idle timeout starts again
		ev := stream.Current()
		size += len(ev.Delta.Text) + len(ev.Delta.PartialJSON) + len(ev.Delta.Thinking) + len(ev.Delta.Signature)
		if ev.Type == "content_block_start" {
			size += len(ev.ContentBlock.RawJSON())
		}
		if size > maxReplyBytes {
			reply.Text = text.String()
			return reply, errReplyTooLarge
		}
		if err := msg.Accumulate(ev); err != nil {
			reply.Text = text.String()
			return reply, redact(err, m.opts.APIKey)
		}
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" && len(tools) < maxStreamedCalls {
				tools[ev.Index] = toolBlock{len(tools), ev.ContentBlock.Name}
			}
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
				text.WriteString(ev.Delta.Text)
				onText(ev.Delta.Text)
			}
			if tb, ok := tools[ev.Index]; ok && ev.Delta.Type == "input_json_delta" {
				req.ToolCallDelta(tb.i, tb.name, ev.Delta.PartialJSON)
			}
		case "message_stop":
			stopped = true
		}
	}
	reply.Text = text.String()
	if err := stream.Err(); err != nil {
		return reply, redact(err, m.opts.APIKey)
	}
	if !stopped && msg.StopReason == "" { // the SDK may end the stream at message_stop without yielding it
		return reply, errors.New("the stream ended before the model finished its answer")
	}
	if u := msg.Usage; u.JSON.InputTokens.Valid() || u.JSON.OutputTokens.Valid() {
		// Anthropic's input_tokens leave out the cache's: the request's
		// tokens are the three together.
		reply.Usage = &protocol.Usage{InputTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			OutputTokens: u.OutputTokens, CachedInputTokens: u.CacheReadInputTokens}
	}
	text.Reset()
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.Name == "" {
				return reply, fmt.Errorf("the stream sent tool_use block %q without a name", b.ID)
			}
			reply.ToolCalls = append(reply.ToolCalls, protocol.ToolCall{ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	reply.Text = text.String()
	return reply, nil
}

// anthropicMessages converts the conversation: user and assistant
// messages alternate; tool results are tool_result blocks of the user
// message that follows the assistant's tool_use blocks (consecutive user
// content is merged into one message).
func anthropicMessages(req *Request) []anthropic.MessageParam {
	type group struct {
		user   bool
		blocks []anthropic.ContentBlockParamUnion
	}
	var groups []group
	add := func(user bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(groups); n > 0 && groups[n-1].user == user {
			groups[n-1].blocks = append(groups[n-1].blocks, blocks...)
			return
		}
		groups = append(groups, group{user: user, blocks: blocks})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case protocol.RoleUser:
			add(true, anthropic.NewTextBlock(m.Text))
		case protocol.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, tc := range m.ToolCalls {
				in := tc.Input
				if len(in) == 0 || in[0] != '{' { // the API wants an object; the model's bad text is in the result
					in = json.RawMessage(`{}`)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, in, req.ToolName(tc.Name)))
			}
			add(false, blocks...)
		case protocol.RoleTool:
			isErr := m.Outcome == nil || !m.Outcome.IsOK()
			add(true, anthropic.NewToolResultBlock(m.ToolCallID, outcomeText(m.Outcome), isErr))
		}
	}
	out := make([]anthropic.MessageParam, len(groups))
	for i, g := range groups {
		if g.user {
			out[i] = anthropic.NewUserMessage(g.blocks...)
		} else {
			out[i] = anthropic.NewAssistantMessage(g.blocks...)
		}
	}
	return out
}
