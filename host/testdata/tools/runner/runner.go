// Package runner uses exec and declares net without using it: brain build
// warns about net, and its payload imports brain_exec.
package runner

import (
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

type Handles struct {
	Exec handle.Exec
	Net  handle.Net
}

type Bindings struct {
	Program string `json:"program"`
}

var Tool = tool.New(tool.Spec{Name: "runner", Description: "Runs the bound program."},
	func(ctx *tool.Context[Handles, Bindings], in struct{}) (int, error) {
		r, err := ctx.Handles.Exec.Run(ctx, handle.Command{Program: ctx.Bindings.Program})
		return r.ExitCode, err
	})
