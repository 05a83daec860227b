package tool_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

type wordCountIn struct {
	Text string `json:"text" jsonschema:"the text to count words in"`
}

type wordCountOut struct {
	Words int `json:"words"`
}

// A tool that needs no handles and no bindings.
func ExampleNew() {
	wc := tool.New(tool.Spec{Name: "text.word_count", Description: "Count the words of a text."},
		func(ctx *tool.Context[tool.None, tool.None], in wordCountIn) (wordCountOut, error) {
			n, inWord := 0, false
			for _, r := range in.Text {
				space := r == ' ' || r == '\n' || r == '\t'
				if !space && !inWord {
					n++
				}
				inWord = !space
			}
			return wordCountOut{Words: n}, nil
		})
	m := wc.Manifest()
	fmt.Println(m.Name, m.Requires, m.BindingNames)
	fmt.Println(string(m.InputSchema))

	inst, _ := wc.Provision(context.Background(), tool.Handles{}, nil)
	out, _ := inst.Invoke(context.Background(), &tool.Call{Input: json.RawMessage(`{"text":"to be or not"}`)})
	fmt.Println(string(out))
	// Output:
	// text.word_count [] []
	// {"type":"object","properties":{"text":{"type":"string","description":"the text to count words in"}},"required":["text"],"additionalProperties":false}
	// {"words":4}
}

type fsOnly struct {
	FS handle.FS
}

// A tool that declares the fs handle: only ctx.Handles.FS exists.
func ExampleNew_handles() {
	read := tool.New(tool.Spec{Name: "fs.read", Description: "Read a file of the workspace."},
		func(ctx *tool.Context[fsOnly, tool.None], in struct {
			Path string `json:"path"`
		}) (string, error) {
			b, err := ctx.Handles.FS.ReadFile(ctx, in.Path)
			return string(b), err
		})
	fmt.Println(read.Manifest().Requires)
	// Output:
	// [fs]
}
