package mcpbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	segjson "github.com/segmentio/encoding/json"

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
	if vetFast(body) {
		return nil
	}
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

// vetFast reports, in one pass that allocates next to nothing, whether
// body is one JSON-RPC request or notification that vetLine passes:
// "jsonrpc" exactly "2.0", a string "method", "params" an object or an
// array, an id a string without escapes or an integer of at most 15
// digits, no member in another case than its own, nothing after the
// object. False means only that vetLine must look: a response, a batch,
// an id of another shape, escapes. vetLine's reads (a map of the members,
// the SDK's decode) cost a call over HTTP 13 % of its time and 27 of its
// allocations, for what nearly every POST is (FuzzVetFast holds the two
// to agreeing).
func vetFast(body []byte) bool {
	if !json.Valid(body) { // the tokenizer reads what it can, valid or not
		return false
	}
	var t segjson.Tokenizer
	t.Reset(body)
	defer t.Reset(nil) // its stack back to the pool
	if !t.Next() || t.Delim != '{' {
		return false
	}
	var pending string // the member whose value comes next
	var version, method, closed bool
	for t.Next() {
		switch {
		case closed:
			return false // a second value
		case t.Depth == 0:
			closed = t.Delim == '}'
		case t.Depth != 1 || t.Delim == ':' || t.Delim == ',':
		case t.IsKey:
			key := t.Value
			if len(key) < 2 || key[0] != '"' || bytes.IndexByte(key, '\\') >= 0 {
				return false // the tokenizer marks what follows '{' as a key, whatever it is
			}
			key = key[1 : len(key)-1]
			pending = ""
			for _, name := range memberNames {
				switch {
				case string(key) == name:
					pending = name
				case strings.EqualFold(string(key), name):
					return false
				}
			}
		case pending != "":
			v := t.Value
			if len(v) == 0 {
				return false
			}
			switch pending {
			case "jsonrpc":
				version = string(v) == `"2.0"`
			case "method":
				method = v[0] == '"'
			case "params":
				if v[0] != '{' && v[0] != '[' {
					return false
				}
			case "id":
				if !plainID(v) {
					return false
				}
			default: // result, error: a response
				return false
			}
			if !version && pending == "jsonrpc" || !method && pending == "method" {
				return false
			}
			pending = ""
		}
	}
	return t.Err == nil && closed && version && method
}

// plainID reports an id that canonicalID takes as it is: a string without
// escapes, or an integer of 1 to 15 digits (under 2^53) other than -0.
func plainID(v []byte) bool {
	if v[0] == '"' {
		return bytes.IndexByte(v, '\\') < 0
	}
	digits := v
	if digits[0] == '-' {
		digits = digits[1:]
		if string(digits) == "0" {
			return false
		}
	}
	if len(digits) == 0 || len(digits) > 15 || digits[0] == '0' && len(digits) > 1 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
