package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// transientExecutable reports whether exe is a binary `go run` built: it
// runs from a go-build directory — of the build cache, which Go trims, or
// of the temporary directory, which it removes when the run ends.
func transientExecutable(exe string) bool {
	return strings.Contains(exe, string(filepath.Separator)+"go-build")
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
	if *host == "" {
		return usageError(stderr, "mcp-config", "--host is required: claude-code, claude-desktop, cursor or vscode")
	}
	if *sessionID == "" {
		return usageError(stderr, "mcp-config", "--session is required: the session the host joins")
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
			if transientExecutable(exe) {
				fmt.Fprintf(stderr, "brain mcp-config: warning: this brain runs from %s, a build of `go run` in a directory Go cleans out: the host could not start it later. Install brain (`go install ./cmd/brain`) and run mcp-config from there, or pass --brain with the path of a brain that stays\n", exe)
			}
		}
		tf := *tokenFile
		if tf == "" {
			tf = "model-token"
		}
		if abs, err := filepath.Abs(tf); err == nil {
			tf = abs // the host starts brain in a directory of its own
		}
		if _, err := os.Stat(tf); err != nil {
			fmt.Fprintf(stderr, "brain mcp-config: warning: the token file %s does not exist yet: put the kernel's model token in it, alone, readable by you only (docs/agent.md, \"MCP hosts\")\n", tf)
		}
		block = map[string]any{"mcpServers": map[string]any{*name: map[string]any{
			"command": exe, "args": []string{"mcp", "--url", *kernelURL, "--session", *sessionID, "--token-file", tf},
		}}}
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
