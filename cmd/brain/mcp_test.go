package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// mcpReplies parses brain mcp's stdout: id → the reply's error message, or
// "" for a result.
func mcpReplies(t *testing.T, stdout string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for line := range strings.Lines(stdout) {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		got[string(m.ID)] = ""
		if m.Error != nil {
			got[string(m.ID)] = m.Error.Message
		}
	}
	return got
}

// withMCPStdin makes in brain mcp's stdin for the test.
func withMCPStdin(t *testing.T, in string) {
	old := mcpStdin
	mcpStdin = strings.NewReader(in)
	t.Cleanup(func() { mcpStdin = old })
}

// TestMCPStdioBadLine (F5): a malformed line in the middle of brain mcp's
// input is answered (-32700, id null) and brain mcp serves on: every
// request is answered and it exits 0.
func TestMCPStdioBadLine(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // the default config serves ./workspace
	withMCPStdin(t, strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`not json`,
		`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	}, "\n")+"\n")
	code, stdout, stderr := runCLI(t, "mcp", "--data", dir)
	if code != 0 {
		t.Fatalf("brain mcp exited %d; stderr:\n%s", code, stderr)
	}
	got := mcpReplies(t, stdout)
	for _, id := range []string{"1", "2", "3"} {
		if msg, ok := got[id]; !ok || msg != "" {
			t.Errorf("request %s: answered %v, error %q; stdout:\n%s", id, ok, msg, stdout)
		}
	}
	if !strings.Contains(stdout, `"id":null,"error":{"code":-32700`) || !strings.Contains(stdout, `"id":null,"error":{"code":-32600,"message":"invalid request: JSON-RPC batches are not supported`) {
		t.Errorf("no -32700 and -32600 replies; stdout:\n%s", stdout)
	}
}

// TestMCPBridgeRefused (F19): brain mcp --url, refused by the kernel,
// answers the host's requests with an error that names the refusal, then
// exits 1 with it on stderr.
func TestMCPBridgeRefused(t *testing.T) {
	kernel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"code":"forbidden","message":"not a model token"}`, http.StatusForbidden)
	}))
	defer kernel.Close()
	t.Setenv("BRAIN_TOKEN", "client-token-0123456789")
	withMCPStdin(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`+"\n")
	code, stdout, stderr := runCLI(t, "mcp", "--url", kernel.URL, "--session", "demo")
	if code != 1 || !strings.Contains(stderr, "refused the MCP session: 403") {
		t.Errorf("brain mcp --url exited %d; stderr:\n%s", code, stderr)
	}
	if msg := mcpReplies(t, stdout)["1"]; !strings.Contains(msg, "403 Forbidden") || !strings.Contains(msg, "not a model token") {
		t.Errorf("initialize answered %q; stdout:\n%s", msg, stdout)
	}
}
