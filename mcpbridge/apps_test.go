package mcpbridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/browsertest"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// uiHost are the client options of a host that draws MCP Apps.
func uiHost() *mcp.ClientOptions {
	return &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{
		Extensions: map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []string{"text/html;profile=mcp-app"}}},
	}}
}

func renderCap(name string, src *protocol.RenderSource) protocol.Capability {
	c := protocol.Capability{
		Name:        name,
		DisplayName: "A card",
		Description: "Draw a card.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}}}`),
		Side:        protocol.SideClient,
		Origin:      protocol.Origin{Kind: protocol.OriginClient},
		Kind:        protocol.KindRender,
		Render:      &protocol.RenderSpec{Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "# {{title}}\n\n{{body}}\n\n- *item* `code`", Streaming: true},
	}
	if src != nil {
		c.Render.Source = *src
	}
	return c
}

// readApp reads the ui:// resource of tool name.
func readApp(t *testing.T, cs *mcp.ClientSession, uri string) *mcp.ResourceContents {
	t.Helper()
	res, err := cs.ReadResource(waitCtx(t), &mcp.ReadResourceParams{URI: uri})
	must(t, err)
	if len(res.Contents) != 1 {
		t.Fatalf("%d contents", len(res.Contents))
	}
	return res.Contents[0]
}

// TestApps (issue 20 item 1): a host that announces the MCP Apps
// extension sees a render capability's tool linked to its ui:// resource,
// lists and reads it — self-contained HTML of type
// text/html;profile=mcp-app, with the CSP its source needs; a host that
// does not sees the tools as before.
func TestApps(t *testing.T) {
	s := session.New("apps", nil)
	must(t, s.Register(session.Client, renderCap("card.show", &protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://widgets.example/card"})))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cs := tr.connect(t, s, uiHost())
			tool := toolNames(t, cs)["card.show"]
			ui, _ := tool.Meta["ui"].(map[string]any)
			uri, _ := ui["resourceUri"].(string)
			if uri != "ui://brain/render/card.show" {
				t.Fatalf("_meta = %v", tool.Meta)
			}
			if echo := toolNames(t, cs)[session.CapabilitiesListName]; echo.Meta["ui"] != nil {
				t.Errorf("a tool that is no render capability has _meta.ui: %v", echo.Meta)
			}
			var listed bool
			for r, err := range cs.Resources(waitCtx(t), nil) {
				must(t, err)
				listed = listed || (r.URI == uri && r.MIMEType == "text/html;profile=mcp-app")
			}
			if !listed {
				t.Fatal("the app's resource is not listed")
			}
			rc := readApp(t, cs, uri)
			if rc.MIMEType != "text/html;profile=mcp-app" {
				t.Errorf("mimeType %q", rc.MIMEType)
			}
			html := rc.Text
			if n := strings.Count(html, "<script"); n != 2 { // the capability's JSON, the app
				t.Errorf("%d script elements, want 2", n)
			}
			if m := regexp.MustCompile(`(?i)<[a-z][^>]*\s(src|href)\s*=`).FindString(html); m != "" {
				t.Errorf("the HTML loads something (%q): it must be self-contained", m)
			}
			csp, _ := json.Marshal(rc.Meta["ui"])
			if !strings.Contains(string(csp), `"frameDomains":["https://widgets.example"]`) || !strings.Contains(html, "frame-src https://widgets.example;") {
				t.Errorf("the CSP does not allow the iframe's origin: %s", csp)
			}

			plain := tr.connect(t, s, nil)
			if m := toolNames(t, plain)["card.show"].Meta; m != nil {
				t.Errorf("a host without the extension sees _meta %v", m)
			}
		})
	}
}

// TestAppsRegisteredLater: a host that connected before the session's
// client registered its render capabilities — the usual order — was
// declared the resources capability at initialize, so that a strict
// client reads the ui:// resources it is linked to later (the server
// declared resources only when a render capability was there at
// initialize, and then sent resources/list_changed and ui:// links to a
// client it had not declared resources to).
func TestAppsRegisteredLater(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s := session.New("later-"+tr.name, nil)
			cs := tr.connect(t, s, uiHost())
			if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.ListChanged {
				t.Fatalf("initialize declared %+v, want resources with listChanged", caps)
			}
			must(t, s.Register(session.Client, renderCap("card.later", &protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://widgets.example/card"})))
			uri := "ui://brain/render/card.later"
			deadline := time.Now().Add(testutil.WaitLimit)
			for toolNames(t, cs)["card.later"] == nil {
				if time.Now().After(deadline) {
					t.Fatal("the render capability registered later never became a tool")
				}
				time.Sleep(5 * time.Millisecond) // polling the tool list, for at most WaitLimit
			}
			if rc := readApp(t, cs, uri); rc.MIMEType != "text/html;profile=mcp-app" {
				t.Fatalf("read %s: %q", uri, rc.MIMEType)
			}
		})
	}
}

// TestAppXSS (issue 20, "Must show"): the app, drawn as a host draws it (a
// sandboxed iframe given the tool's input and result over postMessage, as
// the extension does), shows an XSS payload in its props as text; nothing
// of it runs.
func TestAppXSS(t *testing.T) {
	browsertest.Require(t)
	s := session.New("xss", nil)
	// A component this host cannot load (its origin does not resolve): the
	// app draws the markdown fallback, with every prop filled in as text.
	must(t, s.Register(session.Client, renderCap("card.show", &protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: "https://components.invalid/card.js", TagName: "brain-card"})))
	cs := connectHTTP(t, s, uiHost())
	html := readApp(t, cs, "ui://brain/render/card.show").Text

	const payload = `<img src=x onerror="parent.pwned='img'"></script><script>parent.pwned='script'</script>{{title}}`
	props, _ := json.Marshal(map[string]string{"title": payload, "body": "**" + payload + "**"})
	app, _ := json.Marshal(html)
	// The host: the reference protocol of @modelcontextprotocol/ext-apps'
	// AppBridge, by hand: answer ui/initialize, then on initialized send the
	// tool's input (partial first, as while it streams), then its result.
	host := `<!doctype html><html><body><script>
window.rendered = 0; window.pwned = null;
const f = document.createElement('iframe');
f.setAttribute('sandbox', 'allow-scripts allow-same-origin'); // the app shares this page's origin: a payload that ran could reach it
f.srcdoc = ` + string(app) + `;
const send = (m) => f.contentWindow.postMessage(Object.assign({jsonrpc: '2.0'}, m), '*');
window.addEventListener('message', (e) => {
  const m = e.data || {};
  if (m.pwned) { window.pwned = m.pwned; return; }
  if (m.method === 'ui/initialize') send({id: m.id, result: {protocolVersion: '2026-01-26', hostInfo: {name: 'test', version: '0'}, hostCapabilities: {}, hostContext: {}}});
  if (m.method === 'ui/notifications/initialized') {
    send({method: 'ui/notifications/tool-input-partial', params: {arguments: {title: 'partial'}}});
    send({method: 'ui/notifications/tool-input', params: {arguments: ` + string(props) + `}});
    send({method: 'ui/notifications/tool-result', params: {content: [{type: 'text', text: '{}'}], structuredContent: {}}});
  }
  if (m.method === 'ui/notifications/size-changed') window.rendered++;
});
document.body.append(f);
</script></body></html>`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(host))
	}))
	defer ts.Close()

	ctx := browsertest.Tab(t, nil)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second) // Chromium's start on a loaded machine, with room
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(ts.URL)); err != nil {
		t.Fatal(err)
	}
	const doc = `document.querySelector('iframe').contentDocument`
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`window.rendered >= 2 && `+doc+`.querySelector('#status').textContent === 'done' && `+doc+`.querySelector('#app').textContent.includes('onerror')`, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		dbg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({r: window.rendered, p: window.pwned, html: `+doc+`.body.innerHTML.slice(0, 600)})`))
		t.Fatalf("the app did not draw the props and the result: %v (%s)", err, dbg)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Pwned  any    `json:"pwned"`
		Text   string `json:"text"`
		Status string `json:"status"`
	}](`({pwned: window.pwned, text: `+doc+`.querySelector('#app').textContent, status: `+doc+`.querySelector('#status').textContent})`))
	must(t, err)
	pwned, text, status := got.Pwned, got.Text, got.Status
	if pwned != nil {
		t.Fatalf("the payload ran: %v", pwned)
	}
	if strings.Count(text, `<img src=x onerror=`) != 2 || !strings.Contains(text, `<script>parent.pwned`) {
		t.Fatalf("the payload is not shown as text: %q", text)
	}
	if !strings.Contains(text, "{{title}}") {
		t.Errorf("a prop's own {{…}} was filled again: %q", text)
	}
	if status != "done" {
		t.Errorf("status %q after the result, want done", status)
	}
}
