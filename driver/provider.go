package driver

import (
	"fmt"
	"net/http"

	"github.com/brainrt/brain/protocol"
)

// ProviderOptions configure a provider's client.
type ProviderOptions struct {
	// BaseURL is the API's base URL: for OpenAI-compatible servers the one
	// ending in /v1 (Ollama: http://127.0.0.1:11434/v1). Empty means the
	// provider's own.
	BaseURL string
	// APIKey is the key, read by the caller from the environment variable
	// the config names. It is sent to BaseURL and never appears in an error.
	APIKey string
	// Model is the model name (gpt-4.1, qwen3:8b, claude-sonnet-4-5, …).
	Model string
	// MaxRetries bounds the retries of a request answered 408, 409, 429 or
	// 5xx, or that failed to connect, with exponential backoff that honours
	// Retry-After. Default 3; negative means none.
	MaxRetries int
	// MaxTokens bounds the answer of one step (Anthropic requires one).
	// Default 4096.
	MaxTokens int64
	// HTTPClient, if set, sends the requests (tests, proxies).
	HTTPClient *http.Client
}

// maxReplyBytes bounds the text and tool-call arguments of one streamed
// model step: more than any provider's output limit, and than one event
// frame (protocol.MaxFrameBytes) could carry. A server that sends more is
// cut off with an error instead of being held in memory.
const maxReplyBytes = protocol.MaxFrameBytes

// errReplyTooLarge is the error of a step whose answer passed maxReplyBytes.
var errReplyTooLarge = fmt.Errorf("the model's answer passed %d bytes of text and tool-call arguments, the limit of one step", maxReplyBytes)

func (o ProviderOptions) retries() int {
	switch {
	case o.MaxRetries < 0:
		return 0
	case o.MaxRetries == 0:
		return 3
	}
	return o.MaxRetries
}

func (o ProviderOptions) maxTokens() int64 {
	if o.MaxTokens <= 0 {
		return 4096
	}
	return o.MaxTokens
}
