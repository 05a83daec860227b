//go:build wasip1

package guest

import (
	"context"
	"encoding/json"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/abi"
)

// Exec is the exec handle over the host module brain_exec.
type Exec struct{}

//go:wasmimport brain_exec run
func execRun(ptr, n uint32) uint32

func (Exec) Run(_ context.Context, cmd handle.Command) (handle.Result, error) {
	var out handle.Result
	err := call(handle.KindExec, "run", execRun, cmd, &out)
	return out, err
}

// Net is the net handle over the host module brain_net.
type Net struct{}

//go:wasmimport brain_net fetch
func netFetch(ptr, n uint32) uint32

func (Net) Fetch(_ context.Context, req handle.Request) (handle.Response, error) {
	var out handle.Response
	err := call(handle.KindNet, "fetch", netFetch, req, &out)
	return out, err
}

// JS is the js handle over the host module brain_js.
type JS struct{}

//go:wasmimport brain_js call
func jsCall(ptr, n uint32) uint32

func (JS) Call(_ context.Context, source string, args json.RawMessage) (json.RawMessage, error) {
	var out json.RawMessage
	err := call(handle.KindJS, "call", jsCall, abi.JSRequest{Source: source, Args: args}, &out)
	return out, err
}

// Page is the page handle over the host module brain_page. The host keeps
// one tab per call.
type Page struct{}

//go:wasmimport brain_page navigate
func pageNavigate(ptr, n uint32) uint32

//go:wasmimport brain_page text
func pageText(ptr, n uint32) uint32

//go:wasmimport brain_page evaluate
func pageEvaluate(ptr, n uint32) uint32

//go:wasmimport brain_page screenshot
func pageScreenshot(ptr, n uint32) uint32

func (Page) Navigate(_ context.Context, url string) error {
	return call(handle.KindPage, "navigate", pageNavigate, abi.PageRequest{URL: url}, nil)
}

func (Page) Text(_ context.Context, selector string) (string, error) {
	var out string
	err := call(handle.KindPage, "text", pageText, abi.PageRequest{Selector: selector}, &out)
	return out, err
}

func (Page) Evaluate(_ context.Context, expression string) (json.RawMessage, error) {
	var out json.RawMessage
	err := call(handle.KindPage, "evaluate", pageEvaluate, abi.PageRequest{Expression: expression}, &out)
	return out, err
}

func (Page) Screenshot(_ context.Context) ([]byte, error) {
	var out []byte
	err := call(handle.KindPage, "screenshot", pageScreenshot, struct{}{}, &out)
	return out, err
}
