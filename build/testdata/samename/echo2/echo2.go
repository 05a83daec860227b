// Package echo2 has a tool named as host/testdata/tools/echo's is: a build
// of both must refuse the second name, not overwrite the first's files.
package echo2

import "github.com/brainrt/brain/tool"

type In struct {
	Text string `json:"text"`
}

var Tool = tool.New(tool.Spec{Name: "echo", Description: "Echo the text, again."},
	func(ctx *tool.Context[tool.None, tool.None], in In) (In, error) { return in, nil })
