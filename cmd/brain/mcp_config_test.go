package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMCPConfigInDocs (issue 20, "Must show"): every block docs/mcp.md
// shows for a host is what brain mcp-config prints for it, and has the
// shape that host documents.
func TestMCPConfigInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```sh\nbrain (mcp-config [^\n]*)\n```\n\n```json\n(.*?)```")
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		args := strings.Fields(m[1])
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("brain %s: exit %d: %s", m[1], code, errb.String())
		}
		if out.String() != m[2] {
			t.Errorf("brain %s prints\n%s\nbut docs/mcp.md shows\n%s", m[1], out.String(), m[2])
		}
		host := args[2]
		seen[host] = true
		var v map[string]any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		servers, _ := v["mcpServers"].(map[string]any)
		if host == "vscode" {
			servers, _ = v["servers"].(map[string]any)
		}
		srv, _ := servers["brain"].(map[string]any)
		headers, _ := srv["headers"].(map[string]any)
		auth, _ := headers["Authorization"].(string)
		const url = "http://127.0.0.1:7777/v1/sessions/demo/mcp"
		switch host {
		case "claude-code":
			if srv["type"] != "http" || srv["url"] != url || auth != "Bearer ${BRAIN_TOKEN}" {
				t.Errorf("claude-code: %v", srv)
			}
		case "cursor":
			if srv["url"] != url || auth != "Bearer ${env:BRAIN_TOKEN}" || srv["type"] != nil {
				t.Errorf("cursor: %v", srv)
			}
		case "vscode":
			inputs, _ := v["inputs"].([]any)
			in, _ := inputs[0].(map[string]any)
			if srv["type"] != "http" || srv["url"] != url || auth != "Bearer ${input:brain-token}" || in["id"] != "brain-token" || in["password"] != true {
				t.Errorf("vscode: %v", v)
			}
		case "claude-desktop":
			args, _ := srv["args"].([]any)
			if srv["command"] != "/usr/local/bin/brain" || len(args) != 7 || args[0] != "mcp" || args[2] != "http://127.0.0.1:7777" || srv["url"] != nil {
				t.Errorf("claude-desktop: %v", srv)
			}
		}
	}
	for _, h := range []string{"claude-code", "claude-desktop", "cursor", "vscode"} {
		if !seen[h] {
			t.Errorf("docs/mcp.md shows no block for %s", h)
		}
	}
}

// TestMCPConfigWarnings: a Claude Desktop block naming a brain `go run`
// built (which Go cleans out) or a token file not made yet is printed
// with a warning saying what to do; a missing --session is named as such.
func TestMCPConfigWarnings(t *testing.T) {
	if !transientExecutable("/root/.cache/go-build/5a/5a50-d/brain") || !transientExecutable("/tmp/go-build123/b001/exe/brain") || transientExecutable("/usr/local/bin/brain") {
		t.Fatal("transientExecutable does not tell go run's builds from an installed brain")
	}
	var out, errb bytes.Buffer
	missing := filepath.Join(t.TempDir(), "model-token")
	if code := run(context.Background(), []string{"mcp-config", "--host", "claude-desktop", "--session", "demo", "--brain", "/usr/local/bin/brain", "--token-file", missing}, &out, &errb); code != exitOK ||
		!strings.Contains(errb.String(), "warning: the token file "+missing+" does not exist yet") || strings.Contains(errb.String(), "go run") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"mcp-config", "--host", "cursor"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--session is required") {
		t.Fatalf("no --session: exit %d, stderr %q", code, errb.String())
	}
}

func TestMCPConfigRefused(t *testing.T) {
	for _, args := range [][]string{
		{"mcp-config", "--session", "demo"},
		{"mcp-config", "--host", "emacs", "--session", "demo"},
		{"mcp-config", "--host", "cursor"},
		{"mcp-config", "--host", "cursor", "--session", "no spaces"},
		{"mcp-config", "--host", "cursor", "--session", "demo", "--url", "ftp://x"},
		{"mcp", "--url", "http://127.0.0.1:7777"},
		{"mcp", "--session", "demo"},
		// What the MCP probe's URLs became: the path inside a fragment, the
		// endpoint twice, a password copied into a host's config.
		{"mcp-config", "--host", "cursor", "--session", "demo", "--url", "http://127.0.0.1:7777/?x=1#f"},
		{"mcp-config", "--host", "cursor", "--session", "demo", "--url", "http://127.0.0.1:7777/v1/sessions/demo/mcp"},
		{"mcp-config", "--host", "cursor", "--session", "demo", "--url", "http://user:secret-pw@127.0.0.1:7777"},
		// The re-probe's: the API path in capitals, an empty fragment.
		{"mcp-config", "--host", "cursor", "--session", "demo", "--url", "http://127.0.0.1:7777/V1/sessions/demo/mcp"},
		{"mcp-config", "--host", "cursor", "--session", "demo", "--url", "http://127.0.0.1:7777/#"},
		{"mcp-config", "--host", "cursor", "--session", "demo", "--url", "http://127.0.0.1:7777/v1"},
		{"mcp", "--url", "http://127.0.0.1:7777", "--session", "demo", "--config", "brain.yaml"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != exitUsage || out.Len() != 0 {
			t.Errorf("brain %v: exit %d, stdout %q, stderr %q; want usage error", args, code, out.String(), errb.String())
		}
		if strings.Contains(errb.String(), "secret-pw") {
			t.Errorf("brain %v printed the URL's password: %s", args, errb.String())
		}
	}
}
