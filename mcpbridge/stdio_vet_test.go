package mcpbridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/brainrt/brain/mcpbridge"
)

// reply is one line a server wrote, as the tests read it.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// readReplies parses each line of out.
func readReplies(t *testing.T, out []byte) []reply {
	t.Helper()
	var rs []reply
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs
}

// badLine is a line a server must answer with an error.
type badLine struct {
	name, line string
	code       int
	wantID     string
	inMessage  string
}

// badLineCases are lines an MCP server reading newline-delimited JSON-RPC
// must answer with an error (JSON-RPC 2.0 §5.1) and survive: wantID is the
// reply's id, "null" when the line has no usable one.
var badLineCases = []badLine{
	{"not json", `not json`, -32700, "null", "parse error"},
	{"truncated", `{"jsonrpc":"2.0","id":9,"method":`, -32700, "null", "parse error"},
	{"two values on a line", `{"jsonrpc":"2.0","id":9,"method":"ping"} {}`, -32700, "null", "parse error"},
	{"batch", `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, "null", "batch"},
	{"empty batch", `[]`, -32600, "null", "batch"},
	{"number", `42`, -32600, "null", "object"},
	{"null", `null`, -32600, "null", "object"},
	{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":9,"method":"ping"}`, -32600, "9", `"2.0"`},
	{"no jsonrpc", `{"id":"nine","method":"ping"}`, -32600, `"nine"`, `"2.0"`},
	{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, "null", `id {"a":1}`},
	{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600, "null", "id true"},
	{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, "null", "id null"},
	{"method not a string", `{"jsonrpc":"2.0","id":9,"method":5}`, -32600, "9", "invalid request"},
	{"response without id", `{"jsonrpc":"2.0","result":{}}`, -32600, "null", "invalid request"},
	{"response with a bad error", `{"jsonrpc":"2.0","id":9,"error":"no"}`, -32600, "null", "invalid request"},
	{"id in capitals", `{"jsonrpc":"2.0","ID":9,"method":"ping"}`, -32600, "null", "case-sensitive"},
	{"method in capitals", `{"jsonrpc":"2.0","id":9,"Method":"ping"}`, -32600, "null", "case-sensitive"},
	{"too deep", `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"a":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}}`, -32600, "9", "invalid request"},
}

// TestServeEnvironmentStdioBadLine (F5): one malformed line among good
// ones is answered with -32700 or -32600 and the server goes on: the
// requests before it and after it are all answered, and it returns nil at
// the end of input.
func TestServeEnvironmentStdioBadLine(t *testing.T) {
	env := newEnvironment(t)
	for _, tc := range badLineCases {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Join([]string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"text.words","arguments":{"text":"a b c"}}}`,
				tc.line,
				`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
			}, "\n") + "\n"
			var out bytes.Buffer
			if err := mcpbridge.ServeEnvironmentStdio(waitCtx(t), env, strings.NewReader(in), &out); err != nil {
				t.Fatalf("ServeEnvironmentStdio = %v; output:\n%s", err, out.String())
			}
			checkBadLineReplies(t, out.Bytes(), tc.code, tc.wantID, tc.inMessage, "1", "2", "3", "4")
		})
	}
}

// checkBadLineReplies checks that out answers each of ids with a result
// and holds exactly one error reply, of code with id wantID and a message
// containing inMessage.
func checkBadLineReplies(t *testing.T, out []byte, code int, wantID, inMessage string, ids ...string) {
	t.Helper()
	results := map[string]bool{}
	var errs []reply
	for _, r := range readReplies(t, out) {
		switch {
		case r.Error != nil:
			errs = append(errs, r)
		case len(r.ID) > 0:
			results[string(r.ID)] = true
		}
	}
	for _, id := range ids {
		if !results[id] {
			t.Errorf("request %s got no result; output:\n%s", id, out)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("%d error replies, want 1; output:\n%s", len(errs), out)
	}
	e := errs[0]
	if e.Error.Code != code || string(e.ID) != wantID || !strings.Contains(e.Error.Message, inMessage) {
		t.Errorf("error reply: id %s, code %d, message %q; want id %s, code %d, a message with %q", e.ID, e.Error.Code, e.Error.Message, wantID, code, inMessage)
	}
}

// TestServeEnvironmentStdioInexactID (F9): the SDK reads a numeric id as
// a float64 and answers it as an int64, so a fraction or an integer beyond
// 2^53 would be answered under another id. Such a request is refused
// (-32600) under its own id, naming it; integers within ±(2^53-1) are
// answered under exactly the id they came with.
func TestServeEnvironmentStdioInexactID(t *testing.T) {
	env := newEnvironment(t)
	refused := []string{"1.5", "2.9", "1.0", "1e2", "9007199254740992", "9007199254740993", "-9007199254740993", "12345678901234567890"}
	answered := []string{"0", "9007199254740991", "-9007199254740991", `"9007199254740993"`}
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for _, id := range append(refused, answered...) {
		lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
	}
	var out bytes.Buffer
	err := mcpbridge.ServeEnvironmentStdio(waitCtx(t), env, strings.NewReader(strings.Join(lines, "\n")+"\n"), &out)
	if err != nil {
		t.Fatalf("ServeEnvironmentStdio = %v", err)
	}
	got := map[string]reply{}
	for _, r := range readReplies(t, out.Bytes()) {
		if _, dup := got[string(r.ID)]; dup {
			t.Errorf("two replies with id %s; output:\n%s", r.ID, out.String())
		}
		got[string(r.ID)] = r
	}
	for _, id := range refused {
		r, ok := got[id]
		switch {
		case !ok:
			t.Errorf("id %s: no reply under that id; output:\n%s", id, out.String())
		case r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "id "+id):
			t.Errorf("id %s: reply %s, want -32600 naming the id", id, mustJSON(r))
		}
	}
	for _, id := range answered {
		if r, ok := got[id]; !ok || r.Error != nil || r.Result == nil {
			t.Errorf("id %s: reply %s, want a result under that id; output:\n%s", id, mustJSON(r), out.String())
		}
	}
}

// TestServeEnvironmentStdioIDAsWritten: a request whose id the SDK writes
// differently in its reply ("\u0041" as "A") is answered, and at the end of
// input ServeEnvironmentStdio returns (it waited for a reply with the id
// as written, until its context ended).
func TestServeEnvironmentStdioIDAsWritten(t *testing.T) {
	env := newEnvironment(t)
	ids := map[string]string{`"\u0041"`: `"A"`, `-0`: `0`, `"a\/b"`: `"a/b"`, "\"\xff\"": "\"\uFFFD\"", `"<\u0026>"`: `"<&>"`}
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for id := range ids {
		lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
	}
	var out bytes.Buffer
	err := mcpbridge.ServeEnvironmentStdio(waitCtx(t), env, strings.NewReader(strings.Join(lines, "\n")+"\n"), &out)
	if err != nil {
		t.Fatalf("ServeEnvironmentStdio = %v", err)
	}
	got := map[string]bool{}
	for _, r := range readReplies(t, out.Bytes()) {
		if r.Error == nil {
			got[string(r.ID)] = true
		}
	}
	for sent, answered := range ids {
		if !got[answered] {
			t.Errorf("id %s: no result under id %s; output:\n%s", sent, answered, out.String())
		}
	}
}

// TestServeEnvironmentStdioLongLine: a line longer than the transport's
// bound is refused (-32600) and skipped, and the server goes on.
func TestServeEnvironmentStdioLongLine(t *testing.T) {
	env := newEnvironment(t)
	long := `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", 17<<20) + `"}}`
	in := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+long+"\n"),
		strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"ping"}`+"\n"))
	var out bytes.Buffer
	if err := mcpbridge.ServeEnvironmentStdio(waitCtx(t), env, in, &out); err != nil {
		t.Fatalf("ServeEnvironmentStdio = %v; output:\n%s", err, out.String())
	}
	checkBadLineReplies(t, out.Bytes(), -32600, "null", "longer than", "1", "4")
}

// TestServeEnvironmentStdioBadLineConnected: a host connected over pipes
// gets the error reply at once, and the server still serves it after.
func TestServeEnvironmentStdioBadLineConnected(t *testing.T) {
	env := newEnvironment(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(waitCtx(t))
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- mcpbridge.ServeEnvironmentStdio(ctx, env, inR, outW)
		_ = outW.Close()
	}()
	replies := bufio.NewScanner(outR)
	send := func(line string) reply {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if !replies.Scan() {
			t.Fatalf("no reply to %s: %v", line, replies.Err())
		}
		var r reply
		must(t, json.Unmarshal(replies.Bytes(), &r))
		return r
	}
	if r := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`); r.Result == nil {
		t.Fatalf("initialize: %s", mustJSON(r))
	}
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if r := send(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`); r.Error == nil || r.Error.Code != -32600 {
		t.Fatalf("batch: %s", mustJSON(r))
	}
	if r := send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.Error != nil || string(r.ID) != "3" {
		t.Fatalf("ping after the batch: %s", mustJSON(r))
	}
	_ = inW.Close()
	if err := recv(t, served, "ServeEnvironmentStdio to return"); err != nil {
		t.Fatalf("ServeEnvironmentStdio = %v", err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
