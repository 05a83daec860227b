package tools_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/examples/tools/jseval"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/script"
)

func TestJSEval(t *testing.T) {
	// The grant's deadline covers making the call's realm: 10 ms
	// natively, 0.3 s and more under the race detector (which slows the
	// transpiled engine twenty- to fiftyfold) on a loaded machine.
	timeout := 500 * time.Millisecond
	if testutil.RaceEnabled {
		timeout = 5 * time.Second
	}
	envs := newBoth(t, []kernel.Provider{jsProvider(script.Grants{Timeout: timeout, MaxScriptBytes: 4096})}, nil)
	envs.MustAttach(t, kernel.Attachment{Tool: jseval.Tool})
	envs.Run(t, []toolstest.Case{
		{Name: "sum", Tool: "js.eval", Input: `{"source":"(args) => args.a + args.b","args":{"a":1,"b":2}}`, Want: `{"result":3}`},
		{Name: "object result", Tool: "js.eval",
			Input: `{"source":"(a) => ({n: a.items.length, names: a.items.map(i => i.name).join(',')})","args":{"items":[{"name":"x"},{"name":"y"}]}}`,
			Want:  `{"result":{"n":2,"names":"x,y"}}`},
		{Name: "no args", Tool: "js.eval", Input: `{"source":"() => 'hi'"}`, Want: `{"result":"hi"}`},
		{Name: "undefined is null", Tool: "js.eval", Input: `{"source":"() => undefined"}`, Want: `{"result":null}`},
		{Name: "no host access", Tool: "js.eval", Input: `{"source":"() => [typeof require, typeof console, typeof setTimeout, typeof fetch]"}`,
			Want: `{"result":["undefined","undefined","undefined","undefined"]}`},
		{Name: "thrown exception", Tool: "js.eval", Input: `{"source":"() => { throw new Error('boom') }"}`, WantCode: protocol.CodeInvalidArgument, WantMessage: []string{"boom"}},
		{Name: "syntax error", Tool: "js.eval", Input: `{"source":"(a) => {"}`, WantCode: protocol.CodeInvalidArgument},
		{Name: "infinite loop", Tool: "js.eval", Input: `{"source":"() => { while (true) {} }"}`, WantCode: protocol.CodeTimeout},
		// Issue 24, finding 9: on goja this ran to the deadline (timeout).
		{Name: "string doubling", Tool: "js.eval", Input: `{"source":"() => { let s = 'x'; while (true) s += s }"}`, WantCode: protocol.CodeTooLarge, WantMessage: []string{"memory budget"}},
		{Name: "script over the grant's size", Tool: "js.eval", Input: map[string]any{"source": fmt.Sprintf("() => %q", strings.Repeat("x", 5000))}, WantCode: protocol.CodeTooLarge},
		{Name: "missing source", Tool: "js.eval", Input: `{"args":1}`, WantCode: protocol.CodeInvalidInput},
	})
}
