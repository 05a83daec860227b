package mcpbridge_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/brainrt/brain/mcpbridge"
)

// TestHTTPRefusesWhatStdioRefuses: a POST whose message stdio would
// refuse (stdio_vet.go) is refused over HTTP too — 400 Bad Request with the
// JSON-RPC error -32600 naming the problem, never dispatched. An id that
// is not a string or an exact integer is answered under id null: the SDK
// answered 1.5 as 1, 1e2 as 100 and 9007199254740993 as 9007199254740992
// (two calls 1.5 and 1.7 both as 1); a member in the wrong case or another
// "jsonrpc" got plain text, or nothing.
func TestHTTPRefusesWhatStdioRefuses(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	}
	for _, c := range []struct {
		name, body, wantID string
		wantCode           int
		want               string
	}{
		{"fraction", call("1.5"), "null", -32600, "id 1.5 is not an integer"},
		{"another fraction", call("1.7"), "null", -32600, "id 1.7 is not an integer"},
		{"exponent", call("1e2"), "null", -32600, "id 1e2 is not an integer"},
		{"past 2^53", call("9007199254740993"), "null", -32600, "id 9007199254740993 is out of range"},
		{"object", call(`{"a":1}`), "null", -32600, "must be a string or an integer"},
		{"Method", `{"jsonrpc":"2.0","id":3,"Method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, "null", -32600, `member "Method"`},
		{"ID", `{"jsonrpc":"2.0","ID":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, "null", -32600, `member "ID"`},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"a","method":"tools/list"}`, `"a"`, -32600, `"jsonrpc" must be "2.0"`},
		{"not JSON", `{"jsonrpc":"2.0","id":4,`, "null", -32700, "parse error"},
		{"in a batch", `[` + call("2") + `,` + call("2.5") + `]`, "null", -32600, "message 2 of the batch: invalid request: id 2.5 is not an integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			seq := f.s.LastSeq()
			resp := postMCP(t, url, cs.ID(), "2025-06-18", c.body)
			body, _ := io.ReadAll(resp.Body)
			var reply errorReply
			err := json.Unmarshal(body, &reply)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || err != nil ||
				string(reply.ID) != c.wantID || reply.Error.Code != c.wantCode || !strings.Contains(reply.Error.Message, c.want) {
				t.Errorf("%s: %s %q %s, want 400 application/json: %d under id %s saying %q", c.body, resp.Status, resp.Header.Get("Content-Type"), body, c.wantCode, c.wantID, c.want)
			}
			if got := f.s.LastSeq(); got != seq { // an answer came after the call had run
				t.Errorf("%s was dispatched: the session's log went on from %d to %d", c.body, seq, got)
			}
		})
	}
	// The MCP session goes on, and an exact id is answered as it came.
	status, body := rawPost(t, url, cs.ID(), call("9007199254740991"))
	if status != http.StatusOK || !strings.Contains(body, `"id":9007199254740991,`) || !strings.Contains(body, `"result"`) {
		t.Fatalf("a call with id 2^53-1: %d %s", status, body)
	}
}

// TestUnknownNotificationIsDropped: a notification of a method the
// endpoint does not know is accepted (202, no body) and dropped, as
// JSON-RPC has a server ignore it — the SDK answered it with a plain-text
// 400 — and the MCP session goes on.
func TestUnknownNotificationIsDropped(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	for _, n := range []string{
		`{"jsonrpc":"2.0","method":"notifications/whatever"}`,
		`{"jsonrpc":"2.0","method":"foo/bar","params":{"x":1}}`,
	} {
		status, body := rawPost(t, url, cs.ID(), n)
		if status != http.StatusAccepted || body != "" {
			t.Errorf("%s: %d %q, want 202 Accepted and no body", n, status, body)
		}
	}
	if _, err := cs.ListTools(waitCtx(t), nil); err != nil {
		t.Fatalf("tools/list after: %v", err)
	}
}

// FuzzVetFast: whatever vetFast passes, vetLine passes — the fast path
// never lets through what stdio refuses — and for the messages nearly
// every POST is, the fast path is taken.
func FuzzVetFast(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a-1","method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":-7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","ID":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"} {}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":"\u0041","method":"ping"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !mcpbridge.VetFast(body) {
			return
		}
		if _, _, _, problem := mcpbridge.VetLine(body); problem != "" {
			t.Fatalf("vetFast passed %q, which vetLine refuses: %s", body, problem)
		}
	})
}

// TestVetFastTakesTheCommonMessages: the requests and notifications MCP
// clients send take the fast path.
func TestVetFastTakesTheCommonMessages(t *testing.T) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","n":[1,{"a":null}]}}}`,
		`{"method":"notifications/initialized","jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":"7f3a","method":"tools/list","params":{"_meta":{"progressToken":3}}}`,
		` {"jsonrpc":"2.0","id":123456789012345,"method":"ping"} `,
	} {
		if !mcpbridge.VetFast([]byte(s)) {
			t.Errorf("%s: not the fast path", s)
		}
	}
}

// TestBatchRefusedAsJSONRPC: a batch, which MCP 2025-06-18 and later does
// not allow, is refused with a JSON-RPC error under id null (400) — the
// SDK answered plain text, which clients take for a transport failure —
// and nothing in it runs.
func TestBatchRefusedAsJSONRPC(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	seq := f.s.LastSeq()
	resp := postMCP(t, url, cs.ID(), "2025-06-18", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	body, _ := io.ReadAll(resp.Body)
	var reply errorReply
	if err := json.Unmarshal(body, &reply); resp.StatusCode != http.StatusBadRequest || err != nil || string(reply.ID) != "null" ||
		reply.Error.Code != -32600 || !strings.Contains(reply.Error.Message, "batching is not supported") {
		t.Fatalf("a batch: %s %s, want 400 and -32600 under id null", resp.Status, body)
	}
	if got := f.s.LastSeq(); got != seq {
		t.Fatalf("the batch ran: the session's log went on from %d to %d", seq, got)
	}
}

// errorReply is a JSON-RPC error response as a test reads it.
type errorReply struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestUnknownProtocolVersionRefusedAsJSONRPC: a request whose
// Mcp-Protocol-Version this server does not speak gets a JSON-RPC error
// naming the versions it does, where the SDK wrote plain text listing
// 2026-07-28, which a stateful endpoint then refuses (MCP probe).
func TestUnknownProtocolVersionRefusedAsJSONRPC(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	resp := postMCP(t, url, cs.ID(), "1999-01-01", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	body, _ := io.ReadAll(resp.Body)
	var reply errorReply
	if err := json.Unmarshal(body, &reply); resp.StatusCode != http.StatusBadRequest || err != nil || reply.Error.Code != -32600 ||
		!strings.Contains(reply.Error.Message, `"1999-01-01"`) || !strings.Contains(reply.Error.Message, "2025-06-18") || strings.Contains(reply.Error.Message, "2026-07-28") {
		t.Fatalf("an unknown version: %s %s, want 400, -32600 naming the versions served (not 2026-07-28)", resp.Status, body)
	}
}

// TestFutureProtocolVersionRefusedOnEveryMethod: a version only stateless
// handlers serve (2026-07-28 on, 2099-01-01 here) is refused on a GET and
// a DELETE as on a POST — 400, -32022 naming the versions served — and the
// DELETE leaves the session as it was; the SDK opened the GET's stream
// and ended the session (re-probe).
func TestFutureProtocolVersionRefusedOnEveryMethod(t *testing.T) {
	f := newFixture(t)
	url, cs := serveAndConnect(t, f.s)
	for _, method := range []string{"GET", "DELETE", "POST"} {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
		r, _ := http.NewRequestWithContext(waitCtx(t), method, url, body)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Session-Id", cs.ID())
		r.Header.Set("Mcp-Protocol-Version", "2099-01-01")
		resp, err := http.DefaultClient.Do(r)
		must(t, err)
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var reply errorReply
		if err := json.Unmarshal(raw, &reply); resp.StatusCode != http.StatusBadRequest || err != nil || reply.Error.Code != -32022 ||
			!strings.Contains(reply.Error.Message, `"2099-01-01"`) || !strings.Contains(string(raw), "2025-06-18") {
			t.Fatalf("%s with version 2099-01-01: %s %s, want 400 and -32022 naming the versions served", method, resp.Status, raw)
		}
	}
	if err := cs.Ping(waitCtx(t), nil); err != nil {
		t.Fatalf("the session after a refused DELETE: %v", err)
	}
}
