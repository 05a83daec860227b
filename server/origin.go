package server

import (
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/rs/cors"

	"github.com/brainrt/brain/internal/textcut"
)

// forwardedHostHeader carries, on a request another node forwards, the Host
// its client reached (cluster.go): the host a browser's Origin is checked
// against. Without it the owner compared the Origin with its own address,
// and refused a browser's same-origin WebSocket that reached another node.
// A client could send the header itself; the check is for browsers, whose
// WebSocket handshakes carry no header a page chose, and every request
// needs its token anyway.
const forwardedHostHeader = "Brain-Forwarded-Host"

// clientHost is the Host the request's client reached: its own, or, when
// another node forwarded it, the one that node was reached at.
func clientHost(r *http.Request) string {
	if r.Header.Get(forwardedHeader) != "" {
		if h := r.Header.Get(forwardedHostHeader); h != "" {
			return h
		}
	}
	return r.Host
}

// crossOrigin applies to a request the rule coder/websocket's Accept
// applies to a WebSocket handshake, so that the MCP endpoint and the
// WebSocket agree on which browser pages may use them (the MCP transport
// requires servers to check Origin): a request without Origin (any client
// but a browser) passes, as does one whose Origin's host is the host the
// client reached, or matches one of patterns (path.Match, case folded;
// a pattern with "://" is matched against scheme://host). It returns why a
// request is refused, or "".
func crossOrigin(r *http.Request, patterns []string) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return "the Origin header " + strconv.Quote(textcut.Cut(origin, 200)) + " is not a URL with a host"
	}
	host := clientHost(r)
	if strings.EqualFold(u.Host, host) || originMatches(u, patterns) {
		return ""
	}
	why := "the Origin header " + strconv.Quote(textcut.Cut(origin, 200)) + " is another site than " + host + ": a browser page may use this endpoint from its own origin"
	if len(patterns) == 0 {
		return why + " only (a kernel lets pages of other sites in by listing their origins: browser_origins, docs/serve.md)"
	}
	return why + " or one the kernel lists (browser_origins), and this one is not listed"
}

// originMatches reports whether origin u matches one of patterns, as
// coder/websocket matches its OriginPatterns: path.Match, case folded,
// against the host, or against scheme://host for a pattern with "://".
func originMatches(u *url.URL, patterns []string) bool {
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}

// newCORS answers the browsers' CORS requests for the pages of other
// sites that patterns let in (Options.OriginPatterns): a page's fetch of
// the API or the MCP endpoint sends Authorization, so the browser asks
// first (a preflight) and reads the answer only if told it may. Tokens
// are never cookies, so credentials are not allowed: a page sends the
// token it holds, and no page rides on one the browser keeps. nil when
// there are no patterns (same-origin pages need no CORS).
func newCORS(patterns []string) *cors.Cors {
	if len(patterns) == 0 {
		return nil
	}
	return cors.New(cors.Options{
		AllowOriginFunc: func(origin string) bool {
			u, err := url.Parse(origin)
			return err == nil && u.Host != "" && originMatches(u, patterns)
		},
		AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodDelete},
		// What the API and the MCP transport read (a browser sends the
		// CORS-safelisted ones without asking).
		AllowedHeaders: []string{"Authorization", "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"},
		// What a page's script must read: the MCP session, and why a
		// request was refused or should wait.
		ExposedHeaders: []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Retry-After", "Www-Authenticate"},
		MaxAge:         600, // seconds a browser keeps a preflight's answer
	})
}
