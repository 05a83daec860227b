package main

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// browserOriginPatterns checks browser_origins — the sites whose pages
// may use the kernel from a browser (WebSockets, the API, the MCP
// endpoint, with CORS) — and returns them as the server's Origin patterns
// (server.Options.OriginPatterns: scheme://host matched with path.Match).
//
// An entry is an origin, scheme://host[:port], written as browsers send
// it or the way people write it, in which a * stands for any part of a
// host label or a port (https://*.example.com, http://localhost:*). The
// entries that could never match, or would match every site, are
// refused rather than kept silently:
//   - a bare host (a scheme left out would let http pages in where https
//     was meant), a path, a query, credentials, "null" (every sandboxed
//     iframe and file:// page of every site sends it), * alone;
//   - a host whose last label is a wildcard (https://*, http://*.*):
//     every site of that scheme;
//   - a port out of range.
//
// A default port (https's 443, http's 80) is dropped, as browsers drop it
// from Origin; a name in Unicode is written in ASCII (punycode), as
// browsers send it; a :* port also matches no port (http://localhost is
// http://localhost:80, which a browser sends without the port). Schemes
// other than http and https are taken (chrome-extension://id, tauri://,
// capacitor://, an Electron app's own).
func (c *serveConfig) browserOriginPatterns() ([]string, error) {
	out := make([]string, 0, len(c.BrowserOrigins))
	for i, o := range c.BrowserOrigins {
		p, why := originPattern(o)
		if why != "" {
			return nil, c.pos.errorf(fmt.Sprintf("$.browser_origins[%d]", i), "%q %s", o, why)
		}
		out = append(out, p)
		if base, ok := strings.CutSuffix(p, ":*"); ok {
			out = append(out, base)
		}
	}
	return out, nil
}

// notAnOrigin is what a refused browser_origins entry is told to be.
const notAnOrigin = "is not an origin: want scheme://host[:port], e.g. https://app.example.com (a * stands for any part of a host or port: https://*.example.com, http://localhost:*)"

var (
	schemePattern = regexp.MustCompile(`^[a-z][a-z0-9+.\-]*$`)
	// hostLabel is a label of a host pattern once in ASCII: letters,
	// digits, hyphens, underscores and the wildcard.
	hostLabel   = regexp.MustCompile(`^[a-z0-9_*\-]+$`)
	portPattern = regexp.MustCompile(`^[0-9*]+$`)
)

// originPattern turns one entry into a server pattern, or says why not.
func originPattern(o string) (pattern, why string) {
	s := strings.ToLower(strings.TrimSpace(o))
	switch s {
	case "null":
		return "", "cannot be listed: every site's sandboxed iframes and file:// pages send Origin null"
	case "*", "*://*":
		return "", "would let every site in: list the sites (https://app.example.com) or a domain's subdomains (https://*.example.com)"
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !schemePattern.MatchString(scheme) {
		return "", notAnOrigin
	}
	switch scheme {
	case "ws", "wss", "javascript", "data", "file", "about", "blob":
		// Never a page's origin: ws is a socket's URL (list the page's
		// http or https origin), the others send Origin null or none.
		return "", "is no origin a browser page sends: want the page's own scheme://host[:port], e.g. https://app.example.com"
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" || strings.ContainsAny(rest, "/?#@\\ ") {
		return "", notAnOrigin
	}
	host, port := rest, ""
	if strings.HasPrefix(host, "[") { // an IPv6 literal
		end := strings.IndexByte(host, ']')
		if end < 0 || net.ParseIP(host[1:end]) == nil {
			return "", notAnOrigin
		}
		host, port = rest[:end+1], rest[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return "", notAnOrigin
		}
		port = strings.TrimPrefix(port, ":")
	} else {
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			host, port = rest[:i], rest[i+1:]
		}
		labels := strings.Split(host, ".")
		for j, l := range labels {
			if l != "*" && strings.Contains(l, "*") && !isASCII(l) {
				return "", notAnOrigin // a wildcard inside a Unicode label: no one punycode for it
			}
			if !isASCII(l) {
				a, err := idna.Lookup.ToASCII(l)
				if err != nil {
					return "", notAnOrigin
				}
				l = a
			}
			if !hostLabel.MatchString(l) {
				return "", notAnOrigin
			}
			labels[j] = l
		}
		if why := tooWide(scheme, labels); why != "" {
			return "", why
		}
		host = strings.Join(labels, ".")
	}
	switch {
	case port == "" || port == "*":
	case strings.Contains(port, "*"):
		if !portPattern.MatchString(port) {
			return "", notAnOrigin
		}
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' { // browsers send no leading zero
			return "", "has no port " + port + ": a port is 1 to 65535, written as browsers send it (no leading zero)"
		}
		if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
			port = "" // browsers leave the default port out of Origin
		}
	}
	pattern = scheme + "://" + host
	if port != "" {
		pattern += ":" + port
	}
	// An IPv6 literal's brackets are path.Match's character classes.
	return strings.NewReplacer("[", `\[`, "]", `\]`).Replace(pattern), ""
}

// tooWide says why a host pattern with wildcards would let in sites no
// one means to list, or "": a name needs two whole labels after its last
// wildcard (*.example.com, not *.com: every site under a top-level
// domain), and an IPv4 address its first number (192.168.1.*, not *.*.*.*).
func tooWide(scheme string, labels []string) string {
	last := -1
	for i, l := range labels {
		if strings.Contains(l, "*") {
			last = i
		}
	}
	if last < 0 {
		return ""
	}
	ipv4 := len(labels) == 4
	for _, l := range labels {
		ipv4 = ipv4 && strings.Trim(l, "0123456789*") == ""
	}
	switch {
	case ipv4 && !strings.Contains(labels[0], "*"):
		return ""
	case ipv4:
		return "would let every address of " + scheme + " in: give the address's first number (http://192.168.1.*)"
	case last == len(labels)-1:
		return "would let every site of " + scheme + " in: name the site (https://app.example.com) or a domain's subdomains (https://*.example.com)"
	}
	// What follows the last wildcard must be a domain someone owns, not a
	// suffix under which anyone registers one (com, co.uk, github.io: the
	// public suffix list): *.github.io is every GitHub Pages site, and
	// *example.com — a typo of *.example.com — is evilexample.com too.
	suffix := strings.Join(labels[last+1:], ".")
	if ps, _ := publicsuffix.PublicSuffix(suffix); ps == suffix {
		return "would let every site under ." + suffix + " in (anyone may have a name there): name a domain (https://*.example.com)"
	}
	return ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
