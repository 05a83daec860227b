package mcpbridge

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// vetBody checks the body of a POST to the Streamable HTTP endpoint before
// the SDK decodes it (StreamableHTTPOptions.CheckBody, a go-sdk patch:
// third_party/go-sdk/BRAIN-PATCH.md): nil to go on, or the JSON-RPC error
// response to refuse it with (HTTP 400, nothing dispatched).
//
// A message is refused as on stdio ([vetMessage]): -32700 for a body that
// is not JSON, -32600 for a member name in the wrong case, a "jsonrpc"
// other than "2.0", a message the SDK cannot decode, or an id that is not
// a string or an integer within ±(2^53-1). The SDK reads a numeric id as a
// float64, so it answered 1.5 as 1, 1e2 as 100 and 9007199254740993 as
// 9007199254740992 (two calls 1.5 and 1.7 both as 1); and it answered the
// other shapes with plain text, or not at all (a "Method" made a message
// a response, and dropped it). Such an id cannot be echoed as it came: the
// error's id is null — as it is whenever the message has no usable id,
// and for a batch (MCP 2025-03-26, whose messages are vetted one by one:
// one refused refuses the POST). Streamable HTTP has a server that cannot
// accept its input answer with an HTTP error status, and a JSON-RPC error
// response with no id; the SDK answers a request it refuses at the
// transport (an id already in flight) with 400 and -32600 as well.
func vetBody(body []byte) []byte {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' && json.Valid(body) {
		var batch []json.RawMessage
		if err := json.Unmarshal(body, &batch); err != nil || len(batch) == 0 {
			return errorReply(nil, jsonrpc.CodeInvalidRequest, "invalid request: a batch is a non-empty array of JSON-RPC messages")
		}
		for i, m := range batch {
			if _, _, code, problem := vetLine(bytes.TrimSpace(m)); problem != "" {
				return errorReply(nil, code, fmt.Sprintf("message %d of the batch: %s", i+1, problem))
			}
		}
		return nil
	}
	_, id, code, problem := vetLine(body)
	if problem == "" {
		return nil
	}
	if id != nil {
		if _, idProblem := canonicalID(id); idProblem != "" {
			id = nil // 1.5, as stdio echoes it: not an id the SDK could answer under
		}
	}
	return errorReply(id, code, problem)
}
