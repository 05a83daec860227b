// Package main declares a tool that uses only what it declared: it builds.
package main

import (
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

type handles struct {
	FS handle.FS
}

type bindings struct {
	Token string `json:"token"`
}

var _ = tool.New(tool.Spec{Name: "ok", Description: "Uses what it declared."},
	func(ctx *tool.Context[handles, bindings], in struct{ Path string }) (string, error) {
		b, err := ctx.Handles.FS.ReadFile(ctx, in.Path)
		return ctx.Bindings.Token + string(b), err
	})

func main() {}
