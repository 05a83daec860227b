package driver

import (
	"encoding/json"
	"strings"
)

// The providers' answers are the model's, and a model can be made to say
// anything — the API key it was called with among it, if a prompt or a
// hostile server puts it there. What a provider returns is journaled and
// shown to every peer, so the key is taken out of all of it: the streamed
// text (assistant_delta), the streamed arguments (partial props), the
// step's text and its tool calls' arguments. Provider errors were already
// (redact, in openai.go).

// redacted replaces a secret.
const redacted = "[redacted]"

// minSecret is the shortest secret taken out of content: a shorter one
// would match ordinary words.
const minSecret = 8

// secretHolder is a Model that knows secrets its answers must not carry
// (brain's providers: their API key).
type secretHolder interface{ secrets() []string }

func (m *openAIModel) secrets() []string    { return []string{m.opts.APIKey} }
func (m *anthropicModel) secrets() []string { return []string{m.opts.APIKey} }

// secretsOf returns the model's secrets worth redacting.
func secretsOf(m Model) []string {
	sh, ok := m.(secretHolder)
	if !ok {
		return nil
	}
	var out []string
	for _, s := range sh.secrets() {
		if len(s) >= minSecret {
			out = append(out, s)
		}
	}
	return out
}

// redactAll replaces every secret in s.
func redactAll(s string, secrets []string) string {
	for _, k := range secrets {
		if strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, redacted)
		}
	}
	return s
}

// streamRedactor takes secrets out of a stream of pieces: a secret split
// across pieces is caught by holding back the end of what arrived while
// it may be the beginning of a secret.
type streamRedactor struct {
	secrets []string
	held    string
}

// write returns what of piece may be passed on now.
func (r *streamRedactor) write(piece string) string {
	if len(r.secrets) == 0 {
		return piece
	}
	buf := redactAll(r.held+piece, r.secrets)
	hold := 0
	for _, k := range r.secrets {
		for n := min(len(k)-1, len(buf)); n > hold; n-- {
			if strings.HasSuffix(buf, k[:n]) {
				hold = n
				break
			}
		}
	}
	r.held = buf[len(buf)-hold:]
	return buf[:len(buf)-hold]
}

// flush returns what was held back: the stream ended.
func (r *streamRedactor) flush() string {
	out := r.held
	r.held = ""
	return out
}

// redactReply takes the secrets out of a step's reply: its text and its
// tool calls' arguments (JSON text: a secret inside a string becomes
// "[redacted]" there, which keeps valid JSON valid).
func redactReply(reply *Reply, secrets []string) {
	if reply == nil || len(secrets) == 0 {
		return
	}
	reply.Text = redactAll(reply.Text, secrets)
	for i := range reply.ToolCalls {
		in := string(reply.ToolCalls[i].Input)
		if out := redactAll(in, secrets); out != in {
			reply.ToolCalls[i].Input = json.RawMessage(out)
		}
	}
}
