// Package initpanic panics while being provisioned.
package initpanic

import (
	"context"

	"github.com/brainrt/brain/tool"
)

var Tool = tool.New(tool.Spec{Name: "initpanic", Description: "Never provisions."},
	func(ctx *tool.Context[tool.None, tool.None], in struct{}) (string, error) { return "", nil }).
	WithInit(func(context.Context, tool.None, tool.None) error { panic("init exploded") })
