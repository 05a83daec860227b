// Package stall blocks on request, for the deadline tests: it sleeps (WASI
// poll_oneoff) or reads a path through the fs handle (a brain host
// function) during a call, and its init does what the workspace file
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
	Do   string `json:"do" jsonschema:"sleep, read, or anything else to answer"`
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
