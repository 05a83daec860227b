//go:build linux

package proc_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/proc"
)

func ExampleExec_Run() {
	root, err := os.MkdirTemp("", "brain-exec-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	// When brain runs as root, commands run as nobody, who must be able to
	// enter the root.
	if err := os.Chmod(root, 0o755); err != nil {
		fmt.Println(err)
		return
	}

	e, err := proc.New(proc.Grants{
		Root:  root,
		Allow: []string{"echo"},
		// The default, false, runs each command in a network namespace of
		// its own, which needs root; echo needs no isolation from the
		// network, and this example runs anywhere.
		Network: true,
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	// Arguments are never interpreted by a shell.
	res, err := e.Run(context.Background(), handle.Command{Program: "echo", Args: []string{"hello", "$(whoami)"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s", res.Stdout)

	// Programs not on the allow-list are denied.
	_, err = e.Run(context.Background(), handle.Command{Program: "rm", Args: []string{"-rf", "."}})
	fmt.Println(handle.CodeOf(err))
	// Output:
	// hello $(whoami)
	// denied
}

func ExampleClamp() {
	g := proc.Grants{Timeout: time.Minute}
	b, err := proc.Clamp(handle.Command{Timeout: time.Hour, MaxOutput: 100}, g)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Timeout, b.MaxOutputBytes, b.MaxProcesses)
	// Output: 1m0s 100 64
}
