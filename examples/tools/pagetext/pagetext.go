// Package pagetext is the page.text example tool: load a URL in a headless
// browser tab with the page handle and return the visible text of an
// element.
//
// The page loads under the same host rules as the net handle: a URL the
// environment does not allow fails with denied, and so does every request
// the page makes to such a host. A selector that matches nothing fails with
// not_found.
package pagetext

import (
	"unicode/utf8"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// DefaultMaxChars is how much text is returned when the input does not say.
const DefaultMaxChars = 20000

// Input names the page and the element.
type Input struct {
	URL      string `json:"url" jsonschema:"the absolute http or https URL of the page"`
	Selector string `json:"selector,omitempty" jsonschema:"a CSS selector, such as h1 or main .price; the text of the first matching element is returned; default: the whole body"`
	MaxChars int    `json:"max_chars,omitempty" jsonschema:"return at most this many characters; default 20000"`
}

// Output is the element's text.
type Output struct {
	Text      string `json:"text" jsonschema:"the rendered text of the element, as a reader sees it"`
	Truncated bool   `json:"truncated" jsonschema:"true when the text was cut at max_chars"`
}

// Handles: the page handle, and nothing else.
type Handles struct {
	Page handle.Page
}

// Tool returns the text of an element of a web page.
var Tool = tool.New(tool.Spec{Name: "page.text",
	Description: "Load a web page in a headless browser and return the visible text of the first element matching a CSS selector (or of the whole page). Fails with not_found when nothing matches, and with denied when the environment does not allow the host."},
	func(ctx *tool.Context[Handles, tool.None], in Input) (Output, error) {
		limit := in.MaxChars
		switch {
		case limit == 0:
			limit = DefaultMaxChars
		case limit < 0:
			return Output{}, tool.Errorf(string(protocol.CodeInvalidArgument), "max_chars is %d; give a positive number, or 0 for %d", limit, DefaultMaxChars)
		}
		if err := ctx.Handles.Page.Navigate(ctx, in.URL); err != nil {
			return Output{}, err
		}
		text, err := ctx.Handles.Page.Text(ctx, in.Selector)
		if err != nil {
			return Output{}, err
		}
		if utf8.RuneCountInString(text) <= limit {
			return Output{Text: text}, nil
		}
		n := 0
		for i := range text {
			if n == limit {
				return Output{Text: text[:i], Truncated: true}, nil
			}
			n++
		}
		return Output{Text: text}, nil
	})
