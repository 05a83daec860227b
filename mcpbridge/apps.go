package mcpbridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
)

// MCP Apps (SEP-1865): a render capability offered to a host that
// announces the io.modelcontextprotocol/ui extension is a tool whose
// _meta.ui.resourceUri names a ui:// resource, an HTML page of type
// text/html;profile=mcp-app that the host draws in a sandboxed iframe and
// gives the call's input (the props) and result over postMessage. The page
// is self-contained (one inline script, app.js, allowed by its hash) and
// is the same for every call: props reach it only as messages, and it
// draws them through text nodes and properties, never as HTML.

// appMIMEType is the MIME type of an MCP App's HTML.
const appMIMEType = "text/html;profile=mcp-app"

//go:embed app.js
var appScript string

// appURI is the ui:// resource of render capability name.
func appURI(name string) string { return "ui://brain/render/" + url.PathEscape(name) }

// supportsApps reports whether the client of ss announced the MCP Apps
// extension with the app MIME type (or no list of types).
func supportsApps(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil {
		return false
	}
	ui, ok := p.Capabilities.Extensions[uiExtension]
	if !ok {
		return false
	}
	m, ok := ui.(map[string]any)
	if !ok {
		return ui != nil
	}
	types, ok := m["mimeTypes"].([]any)
	if !ok {
		return true
	}
	for _, t := range types {
		if s, _ := t.(string); s == appMIMEType || s == "text/html" {
			return true
		}
	}
	return false
}

// appResource is the resource of render capability c.
func appResource(c *protocol.Capability) *mcp.Resource {
	title := c.DisplayName
	if title == "" {
		title = c.Name
	}
	return &mcp.Resource{URI: appURI(c.Name), Name: "render:" + c.Name, Title: title,
		Description: "How " + c.Name + " draws its props (an MCP App)", MIMEType: appMIMEType}
}

// appCSP is what the app's source needs of the host's CSP (_meta.ui.csp):
// the component's origin as a resource domain, an iframe's as a frame
// domain. A markdown fallback needs nothing.
func appCSP(c *protocol.Capability) map[string]any {
	if c.Render == nil {
		return nil
	}
	o := originOf(c.Render.Source.URL)
	if o == "" {
		return nil
	}
	switch c.Render.Source.Kind {
	case protocol.SourceIframe:
		return map[string]any{"frameDomains": []string{o}}
	case protocol.SourceWebComponent:
		return map[string]any{"resourceDomains": []string{o}}
	}
	return nil
}

// originOf returns the http(s) origin of u, or "".
func originOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// appHTML is the page of render capability c: the capability's name,
// display name and render spec as JSON (escaped for a script element by
// encoding/json: <, > and & as \u003c…), the app script, and a CSP that
// allows that script by its hash and the source's origin alone.
func appHTML(c *protocol.Capability) string {
	info, _ := json.Marshal(struct {
		Name        string               `json:"name"`
		DisplayName string               `json:"displayName,omitempty"`
		Render      *protocol.RenderSpec `json:"render,omitempty"`
	}{c.Name, c.DisplayName, c.Render})
	sum := sha256.Sum256([]byte(appScript))
	script := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	frame, extra := "'none'", ""
	if c.Render != nil {
		if o := originOf(c.Render.Source.URL); o != "" {
			switch c.Render.Source.Kind {
			case protocol.SourceIframe:
				frame = o
			case protocol.SourceWebComponent:
				extra = " " + o
			}
		}
	}
	csp := "default-src 'none'; script-src " + script + extra + "; style-src 'unsafe-inline'; img-src data:" + extra + "; frame-src " + frame + "; connect-src 'none'; base-uri 'none'; form-action 'none'"
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html><head><meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"")
	b.WriteString(csp)
	b.WriteString("\">\n<meta name=\"viewport\" content=\"width=device-width\">\n<title>")
	b.WriteString(htmlText(c.Name))
	b.WriteString("</title>\n<style>body{font:14px/1.45 system-ui,sans-serif;margin:8px;color:#1d1d1f}iframe{border:0;width:100%;min-height:240px}pre{white-space:pre-wrap;overflow-wrap:anywhere}.why,#status{color:#6e6e73;font-size:12px}#status.error{color:#b00020}</style>\n</head><body>\n<div id=\"app\"></div><p id=\"status\"></p>\n<script type=\"application/json\" id=\"brain-capability\">")
	b.Write(info)
	b.WriteString("</script>\n<script>")
	b.WriteString(appScript)
	b.WriteString("</script>\n</body></html>\n")
	return b.String()
}

// htmlText escapes s for HTML text.
func htmlText(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// exportApp adds or replaces the ui:// resource of render capability c.
func (srv *Server) exportApp(c *protocol.Capability) {
	cp := *c
	srv.mcp.AddResource(appResource(&cp), func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		rc := &mcp.ResourceContents{URI: appURI(cp.Name), MIMEType: appMIMEType, Text: appHTML(&cp)}
		ui := map[string]any{"prefersBorder": true}
		if csp := appCSP(&cp); csp != nil {
			ui["csp"] = csp
		}
		rc.Meta = mcp.Meta{"ui": ui}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}}, nil
	})
}

// appsMiddleware links render tools to their apps in tools/list for hosts
// that announced the extension, and only for them: a host without it sees
// exactly the tools it saw before.
func (srv *Server) appsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/list" {
			return res, err
		}
		lr, ok := res.(*mcp.ListToolsResult)
		if !ok {
			return res, err
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if !supportsApps(ss) {
			return res, err
		}
		srv.expMu.Lock()
		renders := srv.renders
		srv.expMu.Unlock()
		out := *lr
		out.Tools = make([]*mcp.Tool, len(lr.Tools))
		for i, t := range lr.Tools {
			if !renders[t.Name] {
				out.Tools[i] = t
				continue
			}
			ct := *t
			meta := mcp.Meta{}
			for k, v := range t.Meta {
				meta[k] = v
			}
			meta["ui"] = map[string]any{"resourceUri": appURI(t.Name)}
			meta["ui/resourceUri"] = appURI(t.Name) // the key of the extension's first hosts
			ct.Meta = meta
			out.Tools[i] = &ct
		}
		return &out, nil
	}
}
