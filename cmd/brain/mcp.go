package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
)

// runMCP is `brain mcp`: the configured environment's tools served over
// stdio, so that an MCP host can launch brain directly. Logs go to stderr;
// stdout carries only the protocol.
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mcp", "mcp [--config FILE] [--data DIR]",
		`Serves the configured environment's tools to an MCP host over stdio (JSON-RPC
on stdin and stdout; logs on stderr), so that the host can launch brain itself.
There is no session, so nobody to ask for approval: tools whose policy requires
approval, or whose audience leaves out llm, are not served (use brain serve).`,
		`brain mcp --config brain.yaml --data ~/.local/share/brain`)
	config := fs.String("config", "", "environment config (docs/serve.md); default: the example tools over ./workspace")
	data := fs.String("data", "brain-data", "data directory: the compilation cache of artifacts, and the default config's grants file")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "mcp", fs.Args()); !ok {
		return code
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
	if err := mcpbridge.ServeEnvironmentStdio(ctx, env, os.Stdin, stdout); err != nil && ctx.Err() == nil {
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
