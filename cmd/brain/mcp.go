package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
)

// mcpStdin is brain mcp's input (a test replaces it).
var mcpStdin io.Reader = os.Stdin

// runMCP is `brain mcp`: the configured environment's tools served over
// stdio, so that an MCP host can launch brain directly. Logs go to stderr;
// stdout carries only the protocol.
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mcp", "mcp [--config FILE] [--data DIR] | mcp --url URL --session ID [--token-file FILE]",
		`Serves the configured environment's tools to an MCP host over stdio (JSON-RPC
on stdin and stdout; logs on stderr), so that the host can launch brain itself.
There is no session, so nobody to ask for approval: tools whose policy requires
approval, or whose audience leaves out llm, are not served (use brain serve).

With --url and --session it bridges stdio to that session of a running kernel
instead (its /v1/sessions/ID/mcp endpoint), so that a host that only launches
processes joins the session: client capabilities, approvals, progress, renders.
The model token comes from $BRAIN_TOKEN or --token-file.`,
		`brain mcp --config brain.yaml --data ~/.local/share/brain
  BRAIN_TOKEN=... brain mcp --url http://127.0.0.1:7777 --session demo`)
	config := fs.String("config", "", "environment config (docs/serve.md); default: the example tools over ./workspace")
	data := fs.String("data", "brain-data", "data directory: the compilation cache of artifacts, and the default config's grants file")
	kernelURL := fs.String("url", "", "bridge to a running kernel at this URL (http or https) instead of serving tools here")
	sessionID := fs.String("session", "", "with --url: the session to join")
	tokenFile := fs.String("token-file", "", "with --url: a file holding the model token (default: $BRAIN_TOKEN)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "mcp", fs.Args()); !ok {
		return code
	}
	if *kernelURL != "" || *sessionID != "" {
		local := false
		fs.Visit(func(f *flag.Flag) { local = local || f.Name == "config" || f.Name == "data" })
		if local {
			return usageError(stderr, "mcp", "--config and --data serve tools here, and --url bridges to a kernel that serves them: give one or the other")
		}
		return runMCPBridge(ctx, *kernelURL, *sessionID, *tokenFile, stdout, stderr)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := loadServeConfig(*config, *data)
	if err != nil {
		fmt.Fprintln(stderr, "brain mcp:", err)
		return 1
	}
	env, cleanup, err := buildEnvironment(ctx, cfg, *data, logger)
	if err != nil {
		fmt.Fprintln(stderr, "brain mcp:", err)
		return 1
	}
	defer cleanup()
	withheld := withholdUnaskable(env)
	for _, n := range withheld {
		logger.Warn("tool not served over stdio: its policy requires approval or leaves out the llm audience, and brain mcp has nobody to ask; use brain serve", slog.String("tool", n))
	}
	if err := mcpbridge.ServeEnvironmentStdio(ctx, env, mcpStdin, stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "brain mcp:", err)
		return 1
	}
	return 0
}

// withholdUnaskable detaches the tools that a session would gate (approval)
// or hide from the model (an audience without llm): stdio has neither a
// session nor anyone to ask. It returns their names.
func withholdUnaskable(env *kernel.Environment) []string {
	var names []string
	for _, c := range env.Capabilities() {
		if c.RequiresApproval || c.Audience != nil && !slices.Contains(c.Audience, protocol.AudienceLLM) {
			names = append(names, c.Name)
		}
	}
	env.Detach(names...)
	return names
}

// runMCPBridge is `brain mcp --url URL --session ID`: stdio bridged to the
// session's MCP endpoint (mcpbridge.Relay).
func runMCPBridge(ctx context.Context, kernelURL, sessionID, tokenFile string, stdout, stderr io.Writer) int {
	endpoint, err := sessionMCPEndpoint(kernelURL, sessionID)
	if err != nil {
		return usageError(stderr, "mcp", "%v", err)
	}
	token, err := modelToken(tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "brain mcp:", err)
		return 1
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := mcpbridge.Relay(ctx, endpoint, mcpStdin, stdout, &mcpbridge.RelayOptions{Token: token, Logger: logger}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "brain mcp:", err)
		return 1
	}
	return 0
}

// sessionMCPEndpoint is the MCP endpoint of session id at kernel base.
func sessionMCPEndpoint(base, id string) (string, error) {
	if base == "" {
		return "", errors.New("--session needs --url (the kernel, such as http://127.0.0.1:7777)")
	}
	if id == "" {
		return "", errors.New("--url needs --session (the session to join)")
	}
	if !server.ValidSessionID(id) {
		return "", fmt.Errorf("--session %q: use 1 to 128 of A-Z a-z 0-9 _ -", id)
	}
	u, err := url.Parse(base)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", fmt.Errorf("--url %q: want the kernel's http or https URL, such as http://127.0.0.1:7777", base)
	case u.User != nil:
		// Never echo it: it holds a secret.
		return "", errors.New("--url holds a user or password: give the model token by --token-file or $BRAIN_TOKEN, never in the URL")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.Contains(base, "#"):
		return "", fmt.Errorf("--url %q: the kernel's URL takes no query or fragment, such as http://127.0.0.1:7777", base)
	case strings.Contains(strings.ToLower(u.Path+"/"), "/v1/"):
		// The session's endpoint, pasted from serve's banner or a config.
		return "", fmt.Errorf("--url %q is a path of the kernel's API: give the kernel's URL alone (%s://%s) and the session by --session", base, u.Scheme, u.Host)
	}
	return strings.TrimRight(u.String(), "/") + "/v1/sessions/" + id + "/mcp", nil
}

// modelToken reads the token from file, or $BRAIN_TOKEN.
func modelToken(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read the token: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("%s holds no token", file)
	}
	if t := strings.TrimSpace(os.Getenv("BRAIN_TOKEN")); t != "" {
		return t, nil
	}
	return "", errors.New("no token: set BRAIN_TOKEN to a model token (tokens.json, side \"model\") or pass --token-file")
}
