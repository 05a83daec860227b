// Package jseval is the js.eval example tool: call a JavaScript function
// on JSON arguments with the js handle.
//
// The script runs with the language and its built-ins only: no file
// system, network, timers or modules. It is stopped at the environment's
// deadline (timeout), and a thrown exception or a syntax error fails with
// invalid_argument and the exception's message.
package jseval

import (
	"bytes"
	"encoding/json"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

// Input is the function and its argument.
type Input struct {
	Source string `json:"source" jsonschema:"a JavaScript function expression, called with args as its one argument, e.g. (args) => args.a + args.b"`
	Args   any    `json:"args,omitempty" jsonschema:"the JSON value passed to the function; default null"`
}

// Output is what the function returned.
type Output struct {
	Result any `json:"result" jsonschema:"the function's return value as JSON; undefined becomes null"`
}

// Handles: the js handle, and nothing else.
type Handles struct {
	JS handle.JS
}

// Tool calls a JavaScript function on JSON arguments.
var Tool = tool.New(tool.Spec{Name: "js.eval",
	Description: "Call a JavaScript function expression, such as (args) => args.items.length, on a JSON argument and return its result as JSON. Only the language and its built-ins are available."},
	func(ctx *tool.Context[Handles, tool.None], in Input) (Output, error) {
		args, err := json.Marshal(in.Args)
		if err != nil {
			return Output{}, tool.Errorf("invalid_args", "args do not encode as JSON: %v", err)
		}
		raw, err := ctx.Handles.JS.Call(ctx, in.Source, args)
		if err != nil {
			return Output{}, err
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return Output{}, tool.Errorf("invalid_result", "the function's result is not JSON: %v", err)
		}
		return Output{Result: v}, nil
	})
