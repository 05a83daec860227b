package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
)

// TestServeMetricsAndLimits: `brain serve` with a `limits:` config serves
// /metrics to the operator token only, counts an MCP call there, and
// applies the configured quota of sessions per token.
func TestServeMetricsAndLimits(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("workspace", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("workspace/notes.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.WriteFile("grants.yaml", []byte("workspace: "+wd+"/workspace\nfs: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("brain.yaml", []byte("grants: grants.yaml\ntools: [fs.read]\nlimits:\n  sessions_per_token: 2\n  pending_calls_per_session: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr, out, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", config: "brain.yaml", idle: time.Hour})
	c, o := servedTokens(t)
	client, operator := []string{"", c}, []string{"", o} // [_, token], as a regexp match would be
	if !strings.Contains(out.String(), "/metrics (operator token)") {
		t.Errorf("the start banner does not say where the metrics are:\n%s", out.String())
	}

	cs := mcpSession(t, ctx, addr, tokenOf(t, "data", "model"), "m1")
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "notes.txt"}}); err != nil {
		t.Fatal(err)
	}
	metrics := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := metrics(client[1]); status != http.StatusForbidden {
		t.Errorf("/metrics with the client token: %d, want 403", status)
	}
	// The call's CallFinished may be reported just after its result.
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; {
		var status int
		status, body = metrics(operator[1])
		if status != http.StatusOK {
			t.Fatalf("/metrics with the operator token: %d %s", status, body)
		}
		if strings.Contains(body, `brain_capability_calls_total{capability="fs.read",code="ok",origin="agent",side="agent"} 1`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a scrape, not synchronising
	}
	for _, want := range []string{
		`brain_capability_calls_total{capability="fs.read",code="ok",origin="agent",side="agent"} 1`,
		`brain_sessions{state="live"} 1`,
		`brain_journal_append_duration_seconds_count`,
		`brain_capability_call_duration_seconds_bucket{capability="fs.read"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// limits.sessions_per_token: 2 — m1 is one, m2 the second, m3 refused.
	p := dialPeer(t, ctx, addr, client[1], "m2", "?after=0")
	p.send("d", &protocol.CapabilityDeregister{Names: []string{}})
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/sessions/m3/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Authorization", "Bearer "+tokenOf(t, "data", "model"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Code, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || e.Code != "quota_exceeded" {
		t.Fatalf("a third session: %d %+v, want 429 quota_exceeded", resp.StatusCode, e)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve ended with %v", err)
	}
}

// TestLimitsConfig: bad limits are errors naming the key and its line.
func TestLimitsConfig(t *testing.T) {
	tests := []struct {
		name, limits, want string
	}{
		{"negative", "  sessions_per_token: -5\n", "limits.sessions_per_token"},
		{"unlimited not allowed", "  capabilities_per_session: -1\n", "limits.capabilities_per_session"},
		{"unknown key", "  sessions: 3\n", "sessions"},
		{"not a number", "  frames_per_second: fast\n", "frames_per_second"},
		{"half unlimited", "  frames_per_second: -1\n  frame_burst: 5\n", "together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, "limits:\n"+tt.limits)
			_, err := loadServeConfig(path, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
	path := writeConfig(t, "limits:\n  sessions_per_token: -1\n  frames_per_second: 50\n  journal_bytes_per_session: 1048576\n  pending_calls_per_session: 16\n")
	cfg, err := loadServeConfig(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Limits.server(); l.SessionsPerToken != -1 || l.FramesPerSecond != 50 || l.JournalBytesPerSession != 1<<20 {
		t.Errorf("server limits %+v", l)
	}
}

// TestServeMetricsWasmPool: a served WebAssembly artifact's instance pool
// shows on /metrics once it has run a call.
func TestServeMetricsWasmPool(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and compiles a WebAssembly artifact")
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer // brain build runs in the module: build, then move out
	if code := run(context.Background(), []string{"build", "../../examples/tools/fsread", "-o", filepath.Join(dir, "artifacts")}, &stdout, &stderr); code != 0 {
		t.Fatalf("build: %d %s", code, stderr.String())
	}
	t.Chdir(dir)
	if err := testutil.WarmCache(filepath.Join("data", "wazero"), filepath.Join("artifacts", "fs.read.tool.json")); err != nil { // brain serve's cache
		t.Fatal(err)
	}
	if err := os.MkdirAll("workspace", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("workspace/notes.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.WriteFile("grants.yaml", []byte("workspace: "+wd+"/workspace\nfs: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("brain.yaml", []byte("grants: grants.yaml\nartifacts: artifacts\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a cold compile under -race on a loaded machine
	defer cancel()
	addr, _, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", config: "brain.yaml", idle: time.Hour})
	_, operator := servedTokens(t)
	cs := mcpSession(t, ctx, addr, tokenOf(t, "data", "model"), "w1")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "notes.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("fs.read: %+v %v", res, err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`brain_wasm_pool_instances{tool="fs.read"} 1`, `brain_wasm_pool_discards_total{tool="fs.read"} 0`, `brain_wasm_pool_limit{tool="fs.read"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve ended with %v", err)
	}
}

// servedTokens reads the client and operator tokens `brain serve` created
// under ./data.
func servedTokens(t *testing.T) (client, operator string) {
	t.Helper()
	return tokenOf(t, "data", "client"), tokenOf(t, "data", "operator")
}

// tokenOf returns the first token of side in dataDir's tokens.json.
func tokenOf(t *testing.T, dataDir, side string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tokens []struct{ Token, Side string }
	}
	if err := json.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tf.Tokens {
		if tk.Side == side {
			return tk.Token
		}
	}
	t.Fatalf("tokens.json lacks a %s token:\n%s", side, raw)
	return ""
}

// TestServeTracing: with OTEL_EXPORTER_OTLP_ENDPOINT set, `brain serve`
// exports an execute_tool span per call; they are flushed when it stops.
func TestServeTracing(t *testing.T) {
	got := make(chan []byte, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			got <- b
		}
	}))
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("workspace", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("workspace/notes.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr, _, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", idle: time.Hour})
	cs := mcpSession(t, ctx, addr, tokenOf(t, "data", "model"), "tr")
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "nope.txt"}}); err != nil {
		t.Fatal(err)
	}
	_ = cs.Close()
	cancel() // stopping flushes the spans
	if err := <-done; err != nil {
		t.Fatalf("serve ended with %v", err)
	}
	var all []byte
	for len(got) > 0 {
		all = append(all, <-got...)
	}
	for _, want := range []string{"execute_tool fs.read", "gen_ai.tool.name", "not_found"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("the exported spans lack %q", want)
		}
	}
}
