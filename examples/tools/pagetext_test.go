package tools_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/brainrt/brain/examples/tools/pagetext"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
)

func TestPageText(t *testing.T) {
	b := sharedBrowser(t)
	envs := newBoth(t, []kernel.Provider{pageProvider(b)}, nil)
	envs.MustAttach(t, kernel.Attachment{Tool: pagetext.Tool})
	port := site.Listener.Addr().(*net.TCPAddr).Port
	page := siteURL("/page.html")
	envs.Run(t, []toolstest.Case{
		{Name: "heading", Tool: "page.text", Input: map[string]any{"url": page, "selector": "h1"}, Want: `{"text":"Hello, brain","truncated":false}`},
		{Name: "class selector", Tool: "page.text", Input: map[string]any{"url": page, "selector": "p.price"}, Want: `{"text":"42 €","truncated":false}`},
		{Name: "rendered line breaks", Tool: "page.text", Input: map[string]any{"url": page, "selector": "main"}, Want: `{"text":"first line\nsecond line","truncated":false}`},
		{Name: "max_chars", Tool: "page.text", Input: map[string]any{"url": page, "selector": "h1", "max_chars": 5}, Want: `{"text":"Hello","truncated":true}`},
		{Name: "nothing matches", Tool: "page.text", Input: map[string]any{"url": page, "selector": "#nope"}, WantCode: protocol.CodeNotFound, WantMessage: []string{"#nope"}},
		{Name: "invalid selector", Tool: "page.text", Input: map[string]any{"url": page, "selector": "[["}, WantCode: protocol.CodeInvalidArgument},
		{Name: "host not allowed", Tool: "page.text", Input: map[string]any{"url": fmt.Sprintf("http://evil.test:%d/page.html", port)}, WantCode: protocol.CodeDenied},
		{Name: "address not allowed", Tool: "page.text", Input: map[string]any{"url": fmt.Sprintf("http://internal.test:%d/page.html", port)}, WantCode: protocol.CodeDenied},
		{Name: "file URL", Tool: "page.text", Input: `{"url":"file:///etc/passwd"}`, WantCode: protocol.CodeDenied},
		{Name: "negative max_chars", Tool: "page.text", Input: map[string]any{"url": page, "max_chars": -1}, WantCode: protocol.CodeInvalidArgument},
	})
}
