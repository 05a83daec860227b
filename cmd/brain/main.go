// Command brain is the brain CLI: a runtime that lets LLM agents call tools
// safely. Run "brain help" for the commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/brainrt/brain/provide/proc"
)

func main() {
	proc.RunHelperIfRequested() // the exec handle's fallback helper; returns at once otherwise
	ctx, stop := signalContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the kernel: WebSocket and MCP endpoints, durable sessions", runServe},
		{"mcp", "serve the configured tools to an MCP host over stdio", runMCP},
		{"env", "run an environment as its own process, attached to a kernel: brain env --kernel URL --session ID --token T", runEnv},
		{"demo", "run a narrated session in one process: register, invoke, approve, replay", runDemo},
		{"build", "build tool packages into artifacts: brain build [packages] -o DIR", runBuild},
		{"inspect", "verify an artifact and show its manifest and imports: brain inspect ARTIFACT", runInspect},
		{"run", "run one call of an artifact: brain run ARTIFACT --input JSON [--grants FILE]", runRun},
	}
}

// run dispatches args to a subcommand and returns the exit code: 0 on
// success, 1 on failure, 2 on bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "brain: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "brain: a runtime that lets LLM agents call tools safely.")
	fmt.Fprintln(w, "\nUsage: brain <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// signalContext is cancelled by SIGINT or SIGTERM: a graceful shutdown.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
