// Package stall blocks on request, for the deadline tests: during a call it
// sleeps (WASI poll_oneoff), reads a path through the fs handle (a brain
// host function that may block), spins, recurses without end, or loops
// around host calls; its init does what the workspace file
// "mode" says — "spin" loops forever, "sleep" sleeps an hour, anything else
// (or no file) initialises.
package stall

import (
	"context"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

type In struct {
	Do   string `json:"do" jsonschema:"sleep, read, spin, recurse, hostloop, or anything else to answer"`
	Path string `json:"path,omitempty"`
}

type Handles struct {
	FS handle.FS
}

var sink int

var Tool = tool.New(tool.Spec{Name: "stall", Description: "Blocks on request."},
	func(ctx *tool.Context[Handles, tool.None], in In) (string, error) {
		switch in.Do {
		case "sleep":
			time.Sleep(time.Hour)
		case "read":
			b, err := ctx.Handles.FS.ReadFile(ctx, in.Path)
			return string(b), err
		case "spin":
			for i := 0; ; i++ {
				sink = i
			}
		case "recurse":
			sink = fib(90)
		case "hostloop":
			for {
				_, _ = ctx.Handles.FS.Stat(ctx, "mode")
			}
		}
		return "awake", nil
	}).
	WithInit(func(ctx context.Context, hs Handles, _ tool.None) error {
		mode, _ := hs.FS.ReadFile(ctx, "mode")
		switch string(mode) {
		case "spin":
			for i := 0; ; i++ {
				sink = i
			}
		case "sleep":
			time.Sleep(time.Hour)
		}
		return nil
	})

// fib recurses exponentially, with no loop of its own.
func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}
