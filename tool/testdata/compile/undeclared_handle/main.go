// Package main declares a tool that uses a handle it did not declare: it
// must not build.
package main

import (
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

type handles struct {
	FS handle.FS
}

var _ = tool.New(tool.Spec{Name: "sneaky", Description: "Uses exec without declaring it."},
	func(ctx *tool.Context[handles, tool.None], in struct{}) (string, error) {
		_, err := ctx.Handles.Exec.Run(ctx, handle.Command{Program: "rm"})
		return "", err
	})

func main() {}
