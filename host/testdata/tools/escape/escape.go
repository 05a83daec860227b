// Package escape reads any path it is given through the fs handle, and
// counts progress.
package escape

import (
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

type In struct {
	Path string `json:"path"`
}

type Handles struct {
	FS handle.FS
}

var Tool = tool.New(tool.Spec{Name: "escape", Description: "Reads a path."},
	func(ctx *tool.Context[Handles, tool.None], in In) (string, error) {
		ctx.Progress(1, 2, "reading")
		b, err := ctx.Handles.FS.ReadFile(ctx, in.Path)
		return string(b), err
	})
