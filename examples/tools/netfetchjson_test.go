package tools_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/brainrt/brain/examples/tools/netfetchjson"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
)

func TestNetFetchJSON(t *testing.T) {
	envs := newBoth(t, []kernel.Provider{netProvider(siteGrants())}, nil)
	envs.MustAttach(t, kernel.Attachment{Tool: netfetchjson.Tool})
	port := site.Listener.Addr().(*net.TCPAddr).Port
	fetch := func(url string) map[string]any { return map[string]any{"url": url} }
	envs.Run(t, []toolstest.Case{
		{Name: "JSON document", Tool: "net.fetch_json", Input: fetch(siteURL("/items.json")),
			// Numbers are kept as written: 2^53+1 and 2.50 survive.
			Want: fmt.Sprintf(`{"status":200,"url":%q,"json":{"items":[{"id":9007199254740993,"name":"a"},{"id":2,"name":"b"}],"total":2.50}}`, siteURL("/items.json"))},
		{Name: "+json content type", Tool: "net.fetch_json", Input: fetch(siteURL("/problem.json")),
			Want: fmt.Sprintf(`{"status":200,"url":%q,"json":{"title":"gone"}}`, siteURL("/problem.json"))},
		{Name: "error status with a JSON body", Tool: "net.fetch_json", Input: fetch(siteURL("/missing.json")),
			Want: fmt.Sprintf(`{"status":404,"url":%q,"json":{"error":"no such item"}}`, siteURL("/missing.json"))},
		{Name: "redirect followed", Tool: "net.fetch_json", Input: fetch(siteURL("/redirect")), Check: func(t testing.TB, out protocol.Outcome) {
			if want := fmt.Sprintf(`"url":%q`, siteURL("/items.json")); !strings.Contains(string(out.Value), want) {
				t.Errorf("value = %s, want the final URL %s", out.Value, want)
			}
		}},
		{Name: "text body", Tool: "net.fetch_json", Input: fetch(siteURL("/text")), WantCode: "not_json", WantMessage: []string{"text/plain", "plain text, not JSON"}},
		{Name: "HTML labelled JSON", Tool: "net.fetch_json", Input: fetch(siteURL("/lies.json")), WantCode: "not_json", WantMessage: []string{"not valid JSON", "<html>"},
			NoTwin: "Go's JSON decoder and JavaScript's JSON.parse word their syntax errors differently (the code is the same)"},
		{Name: "two JSON values", Tool: "net.fetch_json", Input: fetch(siteURL("/two.json")), WantCode: "not_json"},
		{Name: "host not allowed", Tool: "net.fetch_json", Input: fetch(fmt.Sprintf("http://evil.test:%d/items.json", port)), WantCode: protocol.CodeDenied, WantMessage: []string{"evil.test"}},
		{Name: "address not allowed", Tool: "net.fetch_json", Input: fetch(fmt.Sprintf("http://internal.test:%d/items.json", port)), WantCode: protocol.CodeDenied},
		{Name: "loopback literal not allowed", Tool: "net.fetch_json", Input: fetch(fmt.Sprintf("http://127.0.0.1:%d/items.json", port)), WantCode: protocol.CodeDenied},
		{Name: "cloud metadata", Tool: "net.fetch_json", Input: fetch("http://169.254.169.254/latest/meta-data/"), WantCode: protocol.CodeDenied},
		{Name: "redirect to a denied address", Tool: "net.fetch_json", Input: fetch(siteURL(fmt.Sprintf("/redirect-to?url=http://internal.test:%d/items.json", port))), WantCode: protocol.CodeDenied},
		{Name: "scheme not allowed", Tool: "net.fetch_json", Input: fetch(fmt.Sprintf("https://api.test:%d/items.json", port)), WantCode: protocol.CodeDenied},
		{Name: "not a URL", Tool: "net.fetch_json", Input: fetch("items.json"), WantCode: protocol.CodeInvalidArgument},
	})
}
