// Package fsread is the fs.read example tool: read a text file of the
// workspace.
package fsread

import (
	"unicode/utf8"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

// Input names the file.
type Input struct {
	Path string `json:"path" jsonschema:"the file to read, relative to the workspace"`
}

// Output holds the file's text.
type Output struct {
	Text  string `json:"text"`
	Bytes int    `json:"bytes"`
}

// Handles: the fs handle, and nothing else.
type Handles struct {
	FS handle.FS
}

// Tool reads a UTF-8 text file.
var Tool = tool.New(tool.Spec{Name: "fs.read", Description: "Read a UTF-8 text file of the workspace."},
	func(ctx *tool.Context[Handles, tool.None], in Input) (Output, error) {
		b, err := ctx.Handles.FS.ReadFile(ctx, in.Path)
		if err != nil {
			return Output{}, err
		}
		if !utf8.Valid(b) {
			return Output{}, tool.Errorf("not_text", "%s is not UTF-8 text; it has %d bytes", in.Path, len(b))
		}
		return Output{Text: string(b), Bytes: len(b)}, nil
	})
