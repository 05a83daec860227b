//go:build !brain_nomodels

package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/brainrt/brain/protocol"
)

// openAIModel speaks the Chat Completions API.
type openAIModel struct {
	client openai.Client
	opts   ProviderOptions
}

// NewOpenAI returns a model behind the OpenAI Chat Completions API, or any
// server speaking it (Ollama, vLLM, llama.cpp's server, LM Studio) at
// opts.BaseURL. Answers are streamed.
func NewOpenAI(opts ProviderOptions) (Model, error) {
	if opts.Model == "" {
		return nil, errors.New("openai: a model name is required")
	}
	ro := []option.RequestOption{option.WithAPIKey(opts.APIKey), option.WithMaxRetries(opts.retries())}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	return &openAIModel{client: openai.NewClient(ro...), opts: opts}, nil
}

func (m *openAIModel) Step(ctx context.Context, req *Request, onText func(string)) (*Reply, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.opts.Model), Messages: openAIMessages(req),
		// The last chunk then carries the step's token usage.
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}}
	if m.opts.MaxTokens > 0 {
		params.MaxCompletionTokens = param.NewOpt(m.opts.MaxTokens)
	}
	for _, t := range req.Tools {
		fn, err := json.Marshal(struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Parameters  json.RawMessage `json:"parameters"`
		}{t.Name, t.Description, t.InputSchema})
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		// The schema goes out byte for byte as registered.
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(param.Override[shared.FunctionDefinitionParam](json.RawMessage(fn))))
	}
	stream := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	reply := &Reply{}
	var text strings.Builder
	type partial struct {
		id, name string
		args     strings.Builder
	}
	var calls []*partial
	finished := false
	size := 0
	for stream.Next() {
		req.Progress() // a chunk: the idle timeout starts again
		chunk := stream.Current()
		if u := chunk.Usage; u.JSON.PromptTokens.Valid() || u.JSON.CompletionTokens.Valid() {
			reply.Usage = &protocol.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedInputTokens: u.PromptTokensDetails.CachedTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			size += len(ch.Delta.Content)
			for _, tc := range ch.Delta.ToolCalls {
				size += len(tc.Function.Name) + len(tc.Function.Arguments)
			}
			if size > maxReplyBytes {
				return m.partial(reply, &text), errReplyTooLarge
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				onText(d)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index > 127 {
					return m.partial(reply, &text), fmt.Errorf("the stream sent tool call index %d", tc.Index)
				}
				for int(tc.Index) >= len(calls) {
					calls = append(calls, &partial{})
				}
				p := calls[tc.Index]
				if tc.ID != "" {
					p.id = tc.ID
				}
				p.name += tc.Function.Name
				p.args.WriteString(tc.Function.Arguments)
				req.ToolCallDelta(int(tc.Index), p.name, tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finished = true
			}
		}
	}
	if err := stream.Err(); err != nil {
		return m.partial(reply, &text), redact(err, m.opts.APIKey)
	}
	if !finished {
		return m.partial(reply, &text), errors.New("the stream ended before the model finished its answer")
	}
	reply.Text = text.String()
	for i, p := range calls {
		if p.name == "" {
			return m.partial(reply, &text), fmt.Errorf("the stream sent tool call %d without a name", i)
		}
		reply.ToolCalls = append(reply.ToolCalls, protocol.ToolCall{ID: p.id, Name: p.name, Input: json.RawMessage(p.args.String())})
	}
	return reply, nil
}

func (m *openAIModel) partial(r *Reply, text *strings.Builder) *Reply {
	r.Text = text.String()
	return r
}

// openAIMessages converts the conversation: a system message, then user,
// assistant (with tool_calls) and tool messages.
func openAIMessages(req *Request) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	out = append(out, openai.SystemMessage(req.System))
	for _, m := range req.Messages {
		switch m.Role {
		case protocol.RoleUser:
			out = append(out, openai.UserMessage(m.Text))
		case protocol.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(m.Text)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: req.ToolName(tc.Name), Arguments: argumentsText(tc.Input)},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case protocol.RoleTool:
			out = append(out, openai.ToolMessage(outcomeText(m.Outcome), m.ToolCallID))
		}
	}
	return out
}

// argumentsText is a recorded tool call's input as the model's arguments
// text: the JSON itself, or the text a model produced that was not JSON.
func argumentsText(in json.RawMessage) string {
	var s string
	if len(in) > 0 && in[0] == '"' && json.Unmarshal(in, &s) == nil {
		return s
	}
	return string(in)
}

// outcomeText is a tool result as the model reads it: the Outcome JSON,
// {"ok":true,"value":…} or {"ok":false,"error":{"code":…,"message":…}}.
func outcomeText(o *protocol.Outcome) string {
	if o == nil {
		return `{"ok":false,"error":{"code":"internal","message":"no outcome was recorded"}}`
	}
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Sprintf(`{"ok":false,"error":{"code":"internal","message":%q}}`, err.Error())
	}
	return string(b)
}

// redact removes the API key from an error's text: provider errors quote
// requests and response bodies, which a misbehaving server may fill with
// what it was sent.
func redact(err error, key string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if said := providerMessage(err); said != "" {
		msg += ": " + said
	}
	if key != "" && len(key) >= 4 {
		msg = strings.ReplaceAll(msg, key, "[redacted]")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &redactedError{msg: msg, cause: err}
	}
	return &redactedError{msg: msg}
}

// maxProviderMessage bounds what a provider's error body adds to an error.
const maxProviderMessage = 1000

// providerMessage is what an OpenAI-compatible server said about a request
// it refused (a wrong model name, an exhausted quota, a context too long):
// the body's error.message, else the start of the body. The SDK's Error()
// gives only the status ("OpenAI API error: 400 Bad Request"), since the
// body may quote the request: redact takes the key out of the result.
func providerMessage(err error) string {
	var oe *openai.Error
	if !errors.As(err, &oe) || oe == nil {
		return ""
	}
	said := oe.Message
	if said == "" && oe.Response != nil && oe.Response.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(oe.Response.Body, maxProviderMessage+1))
		said = string(b)
	}
	said = strings.Join(strings.Fields(said), " ")
	if len(said) > maxProviderMessage {
		said = strings.ToValidUTF8(said[:maxProviderMessage], "") + "…"
	}
	return said
}

// redactedError is a provider error with the key removed. It unwraps only
// to context errors, never to the SDK's error, which holds the request.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }
