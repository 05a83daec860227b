package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/brainrt/brain/mcpbridge"
)

// runMCP is `brain mcp`: the configured environment's tools served over
// stdio, so that an MCP host can launch brain directly. Logs go to stderr;
// stdout carries only the protocol.
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "environment config (docs/serve.md); default: the example tools over ./workspace")
	data := fs.String("data", "brain-data", "data directory (compiled code, default grants)")
	if err := fs.Parse(args); err != nil {
		return 2
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
	if err := mcpbridge.ServeEnvironmentStdio(ctx, env, os.Stdin, stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "brain mcp:", err)
		return 1
	}
	return 0
}
