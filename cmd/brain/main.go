// Command brain is the brain CLI: a runtime that lets LLM agents call tools
// safely. Run "brain help" for the commands, "brain help <command>" for one.
//
// Exit status, for every command: 0 when the job succeeded, 1 when it
// failed (a tool's error outcome, a file that does not load, a port in
// use), 2 for bad usage (an unknown command or flag, a missing or extra
// argument). Help (-h, --help, brain help) goes to stdout and exits 0.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/brainrt/brain/provide/proc"
)

// Exit codes (docs/cli.md).
const (
	exitOK    = 0 // the job succeeded
	exitFail  = 1 // the job failed
	exitUsage = 2 // the command line is wrong
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
		{"mcp", "serve the configured tools to an MCP host over stdio, or bridge stdio to a session: brain mcp --url URL --session ID", runMCP},
		{"mcp-config", "print an MCP host's configuration for a session: brain mcp-config --host claude-code|claude-desktop|cursor|vscode --session ID", runMCPConfig},
		{"env", "run an environment as its own process, attached to a kernel: brain env --kernel URL --session ID --token T", runEnv},
		{"chat", "talk to a model whose tool calls go through a session: brain chat --model NAME [--url URL --token T]", runChat},
		{"demo", "run a narrated session in one process: register, invoke, approve, replay", runDemo},
		{"build", "build tool packages into artifacts: brain build [packages] -o DIR", runBuild},
		{"inspect", "verify an artifact and show its manifest and imports: brain inspect ARTIFACT", runInspect},
		{"run", "run one call of an artifact: brain run ARTIFACT --input JSON [--grants FILE]", runRun},
		{"version", "print brain's version and build information", runVersion},
	}
}

// run dispatches args to a subcommand and returns the exit code: 0 on
// success, 1 on failure, 2 on bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "-version", "--version":
		return runVersion(ctx, args[1:], stdout, stderr)
	case "help":
		return runHelp(ctx, args[1:], stdout, stderr)
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "brain: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	if len(args) > 1 && isHelpFlag(args[1]) {
		return commandHelp(ctx, c, stdout)
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// runHelp is `brain help [command]`.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return exitOK
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			fmt.Fprintf(stderr, "brain help: unknown command %q\n\n", args[0])
			usage(stderr)
			return exitUsage
		}
		return commandHelp(ctx, c, stdout)
	}
	fmt.Fprintf(stderr, "brain help: want at most one command, got %q\n", args)
	return exitUsage
}

// commandHelp prints a command's own usage (synopsis, flags, example) to
// stdout by running it with -h, which every command answers without doing
// anything else.
func commandHelp(ctx context.Context, c command, stdout io.Writer) int {
	if code := c.run(ctx, []string{"-h"}, stdout, stdout); code != exitOK && code != exitUsage {
		return code
	}
	return exitOK
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

func usage(w io.Writer) {
	fmt.Fprintln(w, "brain: a runtime that lets LLM agents call tools safely.")
	fmt.Fprintln(w, "\nUsage: brain <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'brain help <command>' (or brain <command> -h) for a command's flags and an example.")
	fmt.Fprintln(w, "Exit status: 0 ok, 1 the job failed, 2 bad usage.")
}

// signalContext is cancelled by SIGINT or SIGTERM: a graceful shutdown.
// A second one while it runs ends the process at once (exit status 1),
// as an operator pressing Ctrl-C again means: the running tools end
// unfinished, and nothing acknowledged is lost, as after a kill. One that
// comes within signalRepeatGrace of the first is the same stop: timeout(1)
// and some supervisors signal the process and then its group, and brain
// got both (the re-probe: 2 of 5 stops were cut short).
func signalContext() (context.Context, context.CancelFunc) {
	return signalContextExit(signalRepeatGrace, func() {
		fmt.Fprintln(os.Stderr, "brain: interrupted again: stopping now, without waiting for running tools (nothing acknowledged is lost)")
		os.Exit(exitFail)
	})
}

// signalRepeatGrace is how long after the first signal another is taken
// for the same one: a person pressing Ctrl-C again takes longer.
const signalRepeatGrace = 500 * time.Millisecond

// signalContextExit is signalContext calling exit at a second signal
// grace or more after the first.
func signalContextExit(grace time.Duration, exit func()) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		first := time.Now()
		for {
			select {
			case <-sigs:
				if time.Since(first) >= grace {
					exit()
					return
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel()
		})
	}
}
