package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// mcpHosts are the hosts brain mcp-config writes for, each with where its
// configuration lives and how it reaches a session: over HTTP with a
// bearer header where the host takes one, else through brain mcp --url
// (docs/mcp.md, "A session from any host", shows each).
var mcpHosts = []struct {
	name, where string
}{
	{"claude-code", "the project's .mcp.json (or: claude mcp add-json NAME '<the \"brain\" object>'); Claude Code expands ${BRAIN_TOKEN} from its environment"},
	{"claude-desktop", "claude_desktop_config.json (Settings, Developer, Edit Config); Claude Desktop launches stdio servers only, so it runs brain mcp --url"},
	{"cursor", "~/.cursor/mcp.json, or the project's .cursor/mcp.json; Cursor expands ${env:BRAIN_TOKEN}"},
	{"vscode", "the workspace's .vscode/mcp.json; VS Code asks for the token once (an input) and keeps it in its secret storage"},
}

// runMCPConfig is `brain mcp-config`: the configuration block an MCP host
// expects for a session of a running kernel.
func runMCPConfig(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mcp-config", "mcp-config --host claude-code|claude-desktop|cursor|vscode --session ID [--url URL]",
		`Prints the configuration block an MCP host expects for joining a session of a
running kernel: HTTP with a bearer header where the host supports it, the stdio
bridge (brain mcp --url) where it does not. The token is never written into it:
the block names $BRAIN_TOKEN, a VS Code input, or a token file. Where to put
the block is printed on stderr.`,
		`brain mcp-config --host claude-code --session demo > .mcp.json`)
	host := fs.String("host", "", "claude-code, claude-desktop, cursor or vscode")
	kernelURL := fs.String("url", "http://127.0.0.1:7777", "the kernel")
	sessionID := fs.String("session", "", "the session to join")
	name := fs.String("name", "brain", "the server's name in the host's configuration")
	tokenFile := fs.String("token-file", "", "claude-desktop: the file holding the model token (default: model-token in the current directory)")
	brainPath := fs.String("brain", "", "claude-desktop: the brain executable to launch (default: this one)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "mcp-config", fs.Args()); !ok {
		return code
	}
	endpoint, err := sessionMCPEndpoint(*kernelURL, *sessionID)
	if err != nil {
		return usageError(stderr, "mcp-config", "%v", err)
	}
	if *name == "" {
		return usageError(stderr, "mcp-config", "--name must not be empty")
	}
	var block any
	switch *host {
	case "claude-code":
		block = map[string]any{"mcpServers": map[string]any{*name: map[string]any{
			"type": "http", "url": endpoint, "headers": map[string]string{"Authorization": "Bearer ${BRAIN_TOKEN}"},
		}}}
	case "cursor":
		block = map[string]any{"mcpServers": map[string]any{*name: map[string]any{
			"url": endpoint, "headers": map[string]string{"Authorization": "Bearer ${env:BRAIN_TOKEN}"},
		}}}
	case "vscode":
		block = map[string]any{
			"inputs": []any{map[string]any{"type": "promptString", "id": "brain-token", "description": "brain model token (tokens.json, side \"model\")", "password": true}},
			"servers": map[string]any{*name: map[string]any{
				"type": "http", "url": endpoint, "headers": map[string]string{"Authorization": "Bearer ${input:brain-token}"},
			}},
		}
	case "claude-desktop":
		exe := *brainPath
		if exe == "" {
			if exe, err = os.Executable(); err != nil {
				exe = "brain"
			}
		}
		tf := *tokenFile
		if tf == "" {
			tf = "model-token"
		}
		if abs, err := filepath.Abs(tf); err == nil {
			tf = abs // the host starts brain in a directory of its own
		}
		block = map[string]any{"mcpServers": map[string]any{*name: map[string]any{
			"command": exe, "args": []string{"mcp", "--url", *kernelURL, "--session", *sessionID, "--token-file", tf},
		}}}
	case "":
		return usageError(stderr, "mcp-config", "--host is required: claude-code, claude-desktop, cursor or vscode")
	default:
		return usageError(stderr, "mcp-config", "--host %q: want claude-code, claude-desktop, cursor or vscode", *host)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(block); err != nil {
		fmt.Fprintln(stderr, "brain mcp-config:", err)
		return 1
	}
	_, _ = stdout.Write(b.Bytes())
	for _, h := range mcpHosts {
		if h.name == *host {
			fmt.Fprintf(stderr, "brain mcp-config: for %s: %s\n", h.name, h.where)
		}
	}
	return 0
}
