package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
)

// chatModel is a loopback OpenAI-compatible server answering with the
// Chat Completions streaming format: each element of steps is one answer,
// a tool call ("name {json}") or text.
type chatModel struct {
	mu       sync.Mutex
	steps    []string
	status   int // non-zero: every answer is this status
	requests []string
}

func (m *chatModel) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		n := len(m.requests)
		m.requests = append(m.requests, string(b))
		m.mu.Unlock()
		if m.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(m.status)
			fmt.Fprint(w, `{"error":{"message":"the model is down"}}`)
			return
		}
		if n >= len(m.steps) {
			http.Error(w, "no more steps", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		step := m.steps[n]
		if text, ok := strings.CutPrefix(step, "!hang "); ok { // stream, then stall until the client goes
			chunk(map[string]any{"role": "assistant", "content": text}, nil)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		if name, args, ok := strings.Cut(step, " {"); ok && !strings.Contains(name, " ") {
			call := map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", n), "type": "function",
				"function": map[string]any{"name": name, "arguments": "{" + args}}
			chunk(map[string]any{"role": "assistant", "tool_calls": []any{call}}, nil)
			chunk(map[string]any{}, "tool_calls")
		} else {
			half := len(step) / 2
			chunk(map[string]any{"role": "assistant", "content": step[:half]}, nil)
			chunk(map[string]any{"content": step[half:]}, nil)
			chunk(map[string]any{}, "stop")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func (m *chatModel) request(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i >= len(m.requests) {
		return ""
	}
	return m.requests[i]
}

// chatDir makes a scratch directory with workspace/notes.txt and makes it
// the working directory, as a newcomer's would be.
func chatDir(t *testing.T) string {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("workspace", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("workspace/notes.txt", []byte("buy milk"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHAT_TEST_KEY", "sk-chat-test-0123456789")
	return dir
}

func runChatWith(t *testing.T, stdin string, terminal bool, args ...string) (int, string, string) {
	t.Helper()
	oldIn, oldTerm := chatStdin, chatTerminal
	chatStdin, chatTerminal = strings.NewReader(stdin), func() bool { return terminal }
	t.Cleanup(func() { chatStdin, chatTerminal = oldIn, oldTerm })
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	code := run(ctx, append([]string{"chat"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestChatPiped: stdin is not a terminal: one message, the default
// environment's fs.read reads ./workspace, the final answer alone goes to
// stdout, exit 0.
func TestChatPiped(t *testing.T) {
	chatDir(t)
	m := &chatModel{steps: []string{`fs_read {"path":"notes.txt"}`, "Your notes say: buy milk."}}
	url := m.start(t)
	code, stdout, stderr := runChatWith(t, "what do my notes say?\n", false,
		"--model", "stub", "--model-url", url, "--api-key-env", "CHAT_TEST_KEY")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if stdout != "Your notes say: buy milk.\n" {
		t.Fatalf("stdout %q, want only the final answer", stdout)
	}
	if !strings.Contains(stderr, "→ fs.read") || !strings.Contains(stderr, "← fs.read ok") {
		t.Fatalf("stderr does not show the tool call:\n%s", stderr)
	}
	if !strings.Contains(m.request(1), `buy milk`) {
		t.Fatalf("the model was not sent the file's contents: %s", m.request(1))
	}
	if strings.Contains(stdout+stderr, "sk-chat-test") {
		t.Fatal("the key was printed")
	}
}

// TestChatPipedApprovals: with a config whose policy makes fs.read need
// approval (and whose model: section names the model), --approve decides.
func TestChatPipedApprovals(t *testing.T) {
	for _, tc := range []struct {
		approve, want string
	}{
		{"never", "rejected the call: not approved"},
		{"always", `buy milk`},
	} {
		t.Run(tc.approve, func(t *testing.T) {
			dir := chatDir(t)
			m := &chatModel{steps: []string{`fs_read {"path":"notes.txt"}`, "Done."}}
			url := m.start(t)
			grants := fmt.Sprintf("workspace: %s\nfs: {}\n", filepath.Join(dir, "workspace"))
			cfg := fmt.Sprintf("grants: grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    requiresApproval: true\nmodel:\n  provider: openai\n  url: %s\n  name: stub\n  api_key_env: CHAT_TEST_KEY\n  system: Be brief.\n", url)
			if err := os.WriteFile("grants.yaml", []byte(grants), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile("chat.yaml", []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runChatWith(t, "read my notes", false, "--config", "chat.yaml", "--approve", tc.approve)
			if code != 0 || stdout != "Done.\n" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
			}
			if !strings.Contains(m.request(1), tc.want) {
				t.Fatalf("the tool result sent to the model lacks %s: %s", tc.want, m.request(1))
			}
			if !strings.Contains(m.request(0), "Be brief.") {
				t.Fatal("the config's system prompt was not sent")
			}
		})
	}
}

func TestChatPipedFailure(t *testing.T) {
	chatDir(t)
	m := &chatModel{status: 500}
	url := m.start(t)
	code, stdout, stderr := runChatWith(t, "hi", false, "--model", "stub", "--model-url", url, "--api-key-env", "CHAT_TEST_KEY")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "the turn ended: error") || !strings.Contains(stderr, "500") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}

// TestChatTerminal: the REPL streams the answer, shows the tool call and
// its outcome, asks about an approval inline (rejecting with feedback),
// and leaves on /quit.
func TestChatTerminal(t *testing.T) {
	dir := chatDir(t)
	m := &chatModel{steps: []string{`fs_read {"path":"notes.txt"}`, "I could not read it.", "Bye then."}}
	url := m.start(t)
	grants := fmt.Sprintf("workspace: %s\nfs: {}\n", filepath.Join(dir, "workspace"))
	cfg := "grants: grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    requiresApproval: true\n"
	_ = os.WriteFile("grants.yaml", []byte(grants), 0o600)
	_ = os.WriteFile("chat.yaml", []byte(cfg), 0o600)
	code, stdout, stderr := runChatWith(t, "read my notes\nnot that file\nok bye\n/quit\n", true,
		"--config", "chat.yaml", "--model", "stub", "--model-url", url, "--api-key-env", "CHAT_TEST_KEY")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"brain chat: model stub · tools: fs.read",
		"> ",
		`  → fs.read {"path":"notes.txt"}`,
		"needs approval",
		"  ← fs.read rejected: ",
		"not that file",
		"I could not read it.\n",
		"Bye then.\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("the terminal lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(m.request(1), "not that file") {
		t.Fatalf("the feedback did not reach the model: %s", m.request(1))
	}
	if !strings.Contains(m.request(2), "I could not read it.") || !strings.Contains(m.request(2), "ok bye") {
		t.Fatalf("the second turn does not continue the conversation: %s", m.request(2))
	}
}

func TestChatUsage(t *testing.T) {
	chatDir(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad approve", []string{"--approve", "maybe"}, 2, "--approve"},
		{"no model", []string{"--api-key-env", "CHAT_TEST_KEY"}, 2, "no model name"},
		{"unset key", []string{"--model", "m", "--api-key-env", "CHAT_TEST_UNSET"}, 2, "CHAT_TEST_UNSET"},
		{"bad provider", []string{"--model", "m", "--provider", "acme"}, 2, `provider "acme"`},
		{"remote without token", []string{"--url", "http://127.0.0.1:1"}, 1, "--token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("BRAIN_TOKEN", "")
			code, _, stderr := runChatWith(t, "hi", false, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d mentioning %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// TestChatRemote: brain serve with a model: section runs the turns that
// brain chat --url starts over the WebSocket; a second chat continues the
// session's conversation.
func TestChatRemote(t *testing.T) {
	dir := chatDir(t)
	m := &chatModel{steps: []string{`fs_read {"path":"notes.txt"}`, "Your notes say: buy milk.", "You asked about your notes."}}
	url := m.start(t)
	grants := fmt.Sprintf("workspace: %s\nfs: {}\n", filepath.Join(dir, "workspace"))
	cfg := fmt.Sprintf("grants: grants.yaml\ntools: [fs.read]\nmodel:\n  url: %s\n  name: stub\n  api_key_env: CHAT_TEST_KEY\n", url)
	_ = os.WriteFile("grants.yaml", []byte(grants), 0o600)
	_ = os.WriteFile("kernel.yaml", []byte(cfg), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	addr, out, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", config: "kernel.yaml", consoleAddr: "off", idle: 3600e9})
	token := regexp.MustCompile(`(?m)^    ([0-9a-f]{48})$`).FindStringSubmatch(out.String())
	if token == nil {
		t.Fatalf("no token printed:\n%s", out.String())
	}
	args := []string{"--url", "http://" + addr, "--token", token[1], "--session", "remote"}
	code, stdout, stderr := runChatWith(t, "what do my notes say?", false, args...)
	if code != 0 || stdout != "Your notes say: buy milk.\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runChatWith(t, "what did I ask?", false, args...)
	if code != 0 || stdout != "You asked about your notes.\n" {
		t.Fatalf("second chat: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if r := m.request(2); !strings.Contains(r, "what do my notes say?") || !strings.Contains(r, "buy milk") {
		t.Fatalf("the second turn did not carry the conversation: %s", r)
	}
	// The conversation is readable over HTTP; reading creates no session.
	get := func(id string) (int, map[string]any) { return getConversation(t, ctx, addr, token[1], id) }
	status, body := get("remote")
	msgs, _ := body["messages"].([]any)
	if status != 200 || body["turn"] != float64(2) || body["running"] != false || len(msgs) != 6 {
		t.Fatalf("GET conversation: %d %v", status, body)
	}
	if status, _ := get("nosuch"); status != 404 {
		t.Fatalf("GET conversation of an unknown session: %d, want 404", status)
	}
	cancel()
	<-done
}

// TestChatServeKilledMidTurn: a real brain serve process is killed with
// SIGKILL while the model streams; started again on the same data, the
// session's turn 1 is ended as interrupted, the conversation is intact,
// and brain chat --url continues it.
func TestChatServeKilledMidTurn(t *testing.T) {
	dir := chatDir(t)
	m := &chatModel{steps: []string{"!hang Thinking about ", "Back again."}}
	url := m.start(t)
	grants := fmt.Sprintf("workspace: %s\nfs: {}\n", filepath.Join(dir, "workspace"))
	cfg := fmt.Sprintf("grants: grants.yaml\ntools: [fs.read]\nmodel:\n  url: %s\n  name: stub\n", url)
	_ = os.WriteFile("grants.yaml", []byte(grants), 0o600)
	_ = os.WriteFile("kernel.yaml", []byte(cfg), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 120e9)
	defer cancel()
	cmd, addr, token := startBrain(t, dir, "--config", "kernel.yaml")
	p := dialPeer(t, ctx, addr, token, "k", "?after=0")
	p.send("t", &protocol.TurnStart{Message: "think hard"})
	p.until(protocol.TypeAssistantDelta)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, addr, token = startBrain(t, dir, "--config", "kernel.yaml")
	q := dialPeer(t, ctx, addr, token, "k", "?after=0")
	f := q.until(protocol.TypeTurnEnded)
	if e := f.Msg.(*protocol.TurnEnded); e.Turn != 1 || e.Reason != protocol.TurnInterrupted || !strings.Contains(e.Error, "kernel stopped") {
		t.Fatalf("turn_ended after the restart: %+v", e)
	}
	code, stdout, stderr := runChatWith(t, "are you back?", false, "--url", "http://"+addr, "--token", token, "--session", "k")
	if code != 0 || stdout != "Back again.\n" {
		t.Fatalf("chat after the restart: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if r := m.request(1); !strings.Contains(r, "think hard") || !strings.Contains(r, "are you back?") {
		t.Fatalf("the turn after the restart lacks the conversation: %s", r)
	}
}

// getConversation reads session id's conversation from the kernel at addr
// with token: the status and the body.
func getConversation(t *testing.T, ctx context.Context, addr, token, id string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/sessions/"+id+"/conversation", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// hintWatch is a chat's stderr that reports when a line containing want
// has been written.
type hintWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *hintWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *hintWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestChatRemoteWithoutModel: on a kernel whose config has no model:,
// brain chat --url says what could be wrong once the turn has said
// nothing for a while; interrupted, it cancels its turn (which had stayed
// running, so that every later chat was refused); /cancel cancels a turn
// something else left running; an operator token naming a session that
// does not exist is told why.
func TestChatRemoteWithoutModel(t *testing.T) {
	dir := chatDir(t)
	grants := fmt.Sprintf("workspace: %s\nfs: {}\n", filepath.Join(dir, "workspace"))
	_ = os.WriteFile("grants.yaml", []byte(grants), 0o600)
	_ = os.WriteFile("kernel.yaml", []byte("grants: grants.yaml\ntools: [fs.read]\n"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	addr, out, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", config: "kernel.yaml", consoleAddr: "off", idle: 3600e9})
	tokens := regexp.MustCompile(`(?m)^    ([0-9a-f]{48})$`).FindAllStringSubmatch(out.String(), -1)
	if len(tokens) != 3 {
		t.Fatalf("want the client, model and operator tokens printed:\n%s", out.String())
	}
	client, operator := tokens[0][1], tokens[2][1]
	oldHint := chatQuietHint
	chatQuietHint = 50 * time.Millisecond
	t.Cleanup(func() { chatQuietHint = oldHint })
	conversation := func() map[string]any {
		_, body := getConversation(t, ctx, addr, client, "nomodel")
		return body
	}

	// The hint, then an interruption: the turn is cancelled.
	oldIn, oldTerm := chatStdin, chatTerminal
	chatStdin, chatTerminal = strings.NewReader("hello?"), func() bool { return false }
	t.Cleanup(func() { chatStdin, chatTerminal = oldIn, oldTerm })
	stderr := &hintWatch{want: "no model: section", seen: make(chan struct{})}
	cctx, interrupt := context.WithCancel(ctx)
	exited := make(chan int, 1)
	go func() {
		exited <- run(cctx, []string{"chat", "--url", "http://" + addr, "--token", client, "--session", "nomodel"}, io.Discard, stderr)
	}()
	select {
	case <-stderr.seen:
	case code := <-exited:
		t.Fatalf("chat exited %d before its hint:\n%s", code, stderr)
	}
	interrupt()
	if code := <-exited; code != exitFail || !strings.Contains(stderr.String(), "interrupted: the turn was cancelled") {
		t.Fatalf("interrupted chat: exit %d, want %d and what happened:\n%s", code, exitFail, stderr)
	}
	// The cancel is sent as chat leaves; its turn_ended follows.
	p := dialPeer(t, ctx, addr, client, "nomodel", "?after=0")
	if e := p.until(protocol.TypeTurnEnded).Msg.(*protocol.TurnEnded); e.Turn != 1 || e.Reason != protocol.TurnCancelled {
		t.Fatalf("the interrupted chat's turn: %+v", e)
	}

	// A turn left running by someone else: a chat is refused, saying how
	// to cancel it; /cancel does.
	p.send("t2", &protocol.TurnStart{Message: "left running"})
	p.until(protocol.TypeTurnStarted)
	code, _, errOut := runChatWith(t, "hi", false, "--url", "http://"+addr, "--token", client, "--session", "nomodel")
	if code != exitFail || !strings.Contains(errOut, "turn 2 is still running") || !strings.Contains(errOut, "/cancel cancels it") {
		t.Fatalf("chat beside a running turn: exit %d:\n%s", code, errOut)
	}
	code, _, errOut = runChatWith(t, "/cancel", false, "--url", "http://"+addr, "--token", client, "--session", "nomodel")
	if code != exitOK || !strings.Contains(errOut, "turn 2 cancelled") {
		t.Fatalf("/cancel: exit %d:\n%s", code, errOut)
	}
	if body := conversation(); body["running"] != false || body["turn"] != float64(2) {
		t.Fatalf("after /cancel: %v", body)
	}

	// An operator joins only sessions that exist.
	code, _, errOut = runChatWith(t, "hi", false, "--url", "http://"+addr, "--token", operator, "--session", "nosuch")
	if code != exitFail || !strings.Contains(errOut, "an operator joins sessions that exist") || !strings.Contains(errOut, "(404)") {
		t.Fatalf("operator, unknown session: exit %d:\n%s", code, errOut)
	}
	cancel()
	<-done
}
