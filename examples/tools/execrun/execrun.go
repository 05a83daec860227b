// Package execrun is the exec.run example tool: run one allow-listed
// program with the exec handle and return what it printed.
//
// There is no shell: the program and its arguments are passed as they are,
// so pipes, redirections, globs and variables in an argument are plain
// text. Which programs may run, for how long and with how much output is
// decided by the environment's grants; the tool cannot widen them.
package execrun

import (
	"strings"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Input is one command.
type Input struct {
	Program   string   `json:"program" jsonschema:"the program to run: a name on the environment's allow-list, such as git or go; there is no shell"`
	Args      []string `json:"args,omitempty" jsonschema:"the arguments after the program name, each passed as is: no quoting, globbing, pipes or variable expansion"`
	Dir       string   `json:"dir,omitempty" jsonschema:"the working directory, relative to the workspace; default: the workspace itself"`
	Stdin     string   `json:"stdin,omitempty" jsonschema:"text written to the program's standard input"`
	TimeoutMS int      `json:"timeout_ms,omitempty" jsonschema:"a deadline in milliseconds, shorter than the environment's; 0 means the environment's"`
}

// Output is what the program did. A non-zero exit code is not an error.
type Output struct {
	ExitCode  int    `json:"exit_code" jsonschema:"the exit status: 0 usually means success; -1 means the program was killed by a signal"`
	Stdout    string `json:"stdout" jsonschema:"what the program wrote to standard output (invalid UTF-8 is replaced by U+FFFD)"`
	Stderr    string `json:"stderr" jsonschema:"what the program wrote to standard error (invalid UTF-8 is replaced by U+FFFD)"`
	Truncated bool   `json:"truncated" jsonschema:"true when output beyond the environment's cap was discarded"`
}

// Handles: the exec handle, and nothing else.
type Handles struct {
	Exec handle.Exec
}

// Tool runs one allow-listed program and returns its exit code and output.
var Tool = tool.New(tool.Spec{Name: "exec.run",
	Description: "Run one allow-listed program with arguments (no shell) in the workspace and return its exit code, standard output and standard error. A program not on the allow-list fails with denied."},
	func(ctx *tool.Context[Handles, tool.None], in Input) (Output, error) {
		if in.TimeoutMS < 0 {
			return Output{}, tool.Errorf(string(protocol.CodeInvalidArgument), "timeout_ms is %d; give a positive number of milliseconds, or 0 for the environment's deadline", in.TimeoutMS)
		}
		cmd := handle.Command{Program: in.Program, Args: in.Args, Dir: in.Dir,
			Timeout: time.Duration(in.TimeoutMS) * time.Millisecond}
		if in.Stdin != "" {
			cmd.Stdin = []byte(in.Stdin)
		}
		r, err := ctx.Handles.Exec.Run(ctx, cmd)
		if err != nil {
			return Output{}, err
		}
		return Output{ExitCode: r.ExitCode, Stdout: text(r.Stdout), Stderr: text(r.Stderr), Truncated: r.Truncated}, nil
	})

// text returns b as valid UTF-8, so the output is the same JSON however it
// is encoded.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }
