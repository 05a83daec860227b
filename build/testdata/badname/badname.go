// Package badname has a tool whose name is a path: a build must refuse it
// and write nothing, inside or outside the output directory.
package badname

import "github.com/brainrt/brain/tool"

type In struct {
	Text string `json:"text"`
}

var Tool = tool.New(tool.Spec{Name: "../escaped", Description: "Escape the output directory."},
	func(ctx *tool.Context[tool.None, tool.None], in In) (In, error) { return in, nil })
