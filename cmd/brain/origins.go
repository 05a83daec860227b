package main

import (
	"fmt"
	"net/url"
	"strings"
)

// browserOriginPatterns checks browser_origins — the sites whose pages
// may use the kernel from a browser (WebSockets, the API, the MCP
// endpoint, with CORS) — and returns them as the server's Origin patterns
// (server.Options.OriginPatterns: scheme://host matched with path.Match).
// An entry is an origin, scheme://host[:port], in which a * stands for
// any part of a host or a port (https://*.example.com,
// http://localhost:*); a path, a query or credentials are refused, as a
// bare host is, since a scheme left out would let http pages in where
// https was meant.
func (c *serveConfig) browserOriginPatterns() ([]string, error) {
	out := make([]string, 0, len(c.BrowserOrigins))
	for i, o := range c.BrowserOrigins {
		// url.Parse takes no * in a port: any digit stands for it here.
		u, err := url.Parse(strings.ReplaceAll(o, "*", "1"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil || strings.Contains(o, `\`) {
			return nil, c.pos.errorf(fmt.Sprintf("$.browser_origins[%d]", i),
				"%q is not an origin: want scheme://host[:port], e.g. https://app.example.com (a * stands for any part of a host or port: https://*.example.com, http://localhost:*)", o)
		}
		p := strings.ToLower(strings.TrimSuffix(o, "/"))
		// An IPv6 literal's brackets are path.Match's character classes.
		p = strings.NewReplacer("[", `\[`, "]", `\]`).Replace(p)
		out = append(out, p)
	}
	return out, nil
}
