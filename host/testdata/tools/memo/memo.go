// Package memo keeps the last note it was given in a package variable and
// answers with the one before: state in an instance's memory, which must
// never reach another session.
package memo

import "github.com/brainrt/brain/tool"

type In struct {
	Note string `json:"note" jsonschema:"the note to keep"`
}

type Out struct {
	Previous string `json:"previous" jsonschema:"the note given before this one, by this instance's earlier call"`
}

var last string

var Tool = tool.New(tool.Spec{Name: "memo", Description: "Keeps the last note; answers with the one before."},
	func(ctx *tool.Context[tool.None, tool.None], in In) (Out, error) {
		prev := last
		last = in.Note
		return Out{Previous: prev}, nil
	})
