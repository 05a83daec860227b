// Package main declares a tool that uses a binding it did not declare: it
// must not build.
package main

import (
	"github.com/brainrt/brain/tool"
)

type bindings struct {
	Endpoint string `json:"endpoint"`
}

var _ = tool.New(tool.Spec{Name: "sneaky", Description: "Reads an undeclared token."},
	func(ctx *tool.Context[tool.None, bindings], in struct{}) (string, error) {
		return ctx.Bindings.Token, nil
	})

func main() {}
