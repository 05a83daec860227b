// Package echo is the anchors' echo tool, for the host's benchmarks.
package echo

import "github.com/brainrt/brain/tool"

type In struct {
	Text string `json:"text"`
}

type Out struct {
	Text string `json:"text"`
}

var Tool = tool.New(tool.Spec{Name: "echo", Description: "Echo the text."},
	func(ctx *tool.Context[tool.None, tool.None], in In) (Out, error) { return Out(in), nil })
