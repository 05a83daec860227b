package mcpbridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxSafeID is the largest magnitude of an integer id that the SDK carries
// exactly: it decodes a numeric id as a float64 (then an int64), so
// 9007199254740993 would be answered as 9007199254740992 and 1.5 as 1.
const maxSafeID = 1<<53 - 1

// maxLineLength bounds one message read from stdio: the SDK's own bound
// ([mcp.DefaultMaxLineLength]), past which its transport gives up.
const maxLineLength = mcp.DefaultMaxLineLength

// vetMessage checks one line read from a host on stdio (trimmed, not
// empty) before it goes on: the SDK's stdio transport ends the connection
// on the first message it cannot decode, dropping the replies still owed,
// and a Streamable HTTP endpoint answers such a POST with plain text that
// the bridge cannot pass on. It returns the message to pass on (line, or
// line with its id rewritten as the SDK writes it, see below), or else the
// JSON-RPC error response to give the host instead (JSON-RPC 2.0 §5.1):
// -32700 for a line that is not JSON, -32600 for anything else the SDK
// would refuse, for a batch (MCP 2025-06-18 and later has none), for a
// member name that differs from "jsonrpc", "id", "method", "params",
// "result" or "error" only in case (the SDK reads it as absent: a request
// with "ID" would go unanswered), and for an id that is not a string or an
// integer within ±(2^53-1) (MCP ids are strings or integers, and the SDK
// would answer such a number under another id). The error carries the
// request's id when it has a usable one (a string or a number: a number is
// echoed as it was written), null otherwise; a malformed response from the
// host gets id null, so that it cannot be taken for the answer to one of
// the host's own requests.
//
// An id the SDK would write differently than it came ("\u0041" for "A",
// -0 for 0) is rewritten in the message as the SDK writes it (the same
// value), so that the reply's id is byte for byte the request's: that is
// how drainingIO knows a request was answered.
func vetMessage(line []byte) (msg, reply []byte) {
	msg, id, code, problem := vetLine(line)
	if problem != "" {
		return nil, errorReply(id, code, problem)
	}
	return msg, nil
}

// vetLine is [vetMessage]'s check of line: the message to pass on, or else
// the JSON-RPC error code and message that refuse it and the id to answer
// under (nil: null). The Streamable HTTP endpoint vets a POST's messages
// with it too (vetBody).
func vetLine(line []byte) (msg, id json.RawMessage, code int, problem string) {
	if !json.Valid(line) {
		var v any
		err := json.Unmarshal(line, &v)
		if err == nil { // more than one value on the line
			err = errors.New("more than one JSON value on a line")
		}
		return nil, nil, jsonrpc.CodeParseError, "parse error: " + err.Error()
	}
	switch line[0] {
	case '{':
	case '[':
		return nil, nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 and later has none): send each message on its own line"
	default:
		return nil, nil, jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message is a JSON object"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, nil, jsonrpc.CodeInvalidRequest, "invalid request: " + err.Error()
	}
	_, isRequest := m["method"]
	rawID, hasID := m["id"]
	var canonical json.RawMessage // the id as the SDK writes it
	if hasID {
		var idProblem string
		if canonical, idProblem = canonicalID(rawID); idProblem != "" {
			if isRequest && (rawID[0] == '-' || rawID[0] >= '0' && rawID[0] <= '9') {
				id = rawID
			}
			return nil, id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: id %s %s", clip(rawID), idProblem)
		}
		if isRequest {
			id = rawID
		}
	}
	for k := range m {
		for _, name := range memberNames {
			if k != name && strings.EqualFold(k, name) {
				return nil, id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: member %q: JSON-RPC member names are case-sensitive (%q)", clip([]byte(k)), name)
			}
		}
	}
	var version string
	if err := json.Unmarshal(m["jsonrpc"], &version); err != nil || version != "2.0" {
		return nil, id, jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`
	}
	// What the SDK's transport decodes, it decodes as this does.
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return nil, id, jsonrpc.CodeInvalidRequest, "invalid request: " + err.Error()
	}
	if hasID && !bytes.Equal(canonical, rawID) {
		m["id"] = canonical
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			return nil, id, jsonrpc.CodeInvalidRequest, "invalid request: " + err.Error()
		}
		return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil, 0, ""
	}
	return line, nil, 0, ""
}

// memberNames are the members of a JSON-RPC 2.0 message.
var memberNames = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// canonicalID returns a message's id (raw JSON) as the SDK writes it in
// its reply, or says what is wrong with it.
func canonicalID(raw json.RawMessage) (json.RawMessage, string) {
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, "is not a string: " + err.Error()
		}
		// As the SDK's encoder does it (encoding/json, no HTML escaping).
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return bytes.TrimSuffix(b.Bytes(), []byte("\n")), ""
	case c == 'n':
		return nil, "is not allowed: MCP request ids are strings or integers"
	case c == '-' || c >= '0' && c <= '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		switch {
		case err != nil && bytes.ContainsAny(raw, ".eE"):
			return nil, "is not an integer: MCP request ids are strings or integers"
		case err != nil || n > maxSafeID || n < -maxSafeID:
			return nil, fmt.Sprintf("is out of range: integer ids must be within ±%d", maxSafeID)
		}
		return strconv.AppendInt(nil, n, 10), ""
	default:
		return nil, "must be a string or an integer"
	}
}

// clip shortens b for an error message.
func clip(b []byte) string {
	const most = 64
	if len(b) <= most {
		return string(b)
	}
	return string(b[:most]) + "…"
}

// errorReply is a JSON-RPC error response, on one line without its newline.
func errorReply(id json.RawMessage, code int, message string) []byte {
	type wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, message}})
	return b
}

// lineReader reads newline-delimited messages of at most limit bytes.
type lineReader struct {
	in    *bufio.Reader
	limit int
	buf   []byte
}

func newLineReader(in io.Reader, limit int) *lineReader {
	return &lineReader{in: bufio.NewReaderSize(in, 64<<10), limit: limit}
}

// next returns the next line that is not blank, trimmed; the line is valid
// until the next call. A line longer than limit is skipped and reported as
// tooLong. At the end of input err is io.EOF (after a last line without
// its newline has been returned).
func (r *lineReader) next() (line []byte, tooLong bool, err error) {
	for {
		r.buf = r.buf[:0]
		tooLong = false
		for {
			piece, err := r.in.ReadSlice('\n')
			if !tooLong {
				if len(r.buf)+len(piece) > r.limit+2 { // room for "\r\n"
					tooLong, r.buf = true, r.buf[:0]
				} else {
					r.buf = append(r.buf, piece...)
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && (err != io.EOF || len(r.buf) == 0 && !tooLong) {
				return nil, false, err
			}
			break // a whole line, or the last one
		}
		if tooLong {
			return nil, true, nil
		}
		if line := bytes.TrimSpace(r.buf); len(line) > 0 {
			return line, false, nil
		}
	}
}

// nextMessage returns the next message of the host to pass on, or the
// error reply to give it instead (see [vetMessage]); the message is valid
// until the next call.
func (r *lineReader) nextMessage() (msg, reply []byte, err error) {
	line, tooLong, err := r.next()
	switch {
	case err != nil:
		return nil, nil, err
	case tooLong:
		return nil, errorReply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: a message longer than %d bytes", r.limit)), nil
	}
	msg, reply = vetMessage(line)
	return msg, reply, nil
}

// vettedReader is the input of an SDK stdio transport: the host's
// messages that the SDK can decode, one per line, while the others are
// answered on out (see [vetMessage]).
type vettedReader struct {
	lines *lineReader
	out   io.Writer // shared with the transport, so one Write per message
	rest  []byte    // what is left of the current line
}

func newVettedReader(in io.Reader, out io.Writer) *vettedReader {
	return &vettedReader{lines: newLineReader(in, maxLineLength), out: out}
}

func (v *vettedReader) Read(p []byte) (int, error) {
	for len(v.rest) == 0 {
		msg, reply, err := v.lines.nextMessage()
		if err != nil {
			return 0, err
		}
		if reply == nil {
			// msg lies in the lineReader's buffer (or its own), which is
			// not read again before the next line: end it there.
			v.rest = append(msg, '\n')
			continue
		}
		if _, err := v.out.Write(append(reply, '\n')); err != nil {
			return 0, err
		}
	}
	n := copy(p, v.rest)
	v.rest = v.rest[n:]
	return n, nil
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
