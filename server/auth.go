package server

import (
	"net/http"
	"strings"
)

// bearerToken returns the token a request presents: "Authorization: Bearer
// <token>", or — for a WebSocket handshake to an endpoint that is one
// (wsRoutes) — the query parameter "token". Browsers' WebSocket API
// cannot set headers, so a web page has no other way to authenticate its
// WebSocket; every other endpoint (MCP, the sessions API, /metrics) is
// reached with fetch or an HTTP client that can, and refuses a token in
// its URL, where it would end up in proxies' and servers' access logs —
// whatever headers the request carries (an Upgrade header made any
// endpoint take it, a probe found). docs/protocol.md ("Authentication")
// has the why. Any other Authorization header — no scheme, another
// scheme, "Bearer" without a space — presents no token, and so does a
// handshake whose header and ?token= name two different tokens (which
// one was meant is not ours to guess: the header won, a probe found).
func bearerToken(r *http.Request) string {
	if twoTokens(r) {
		return ""
	}
	header, _ := headerToken(r)
	if wsRoutes[r.Pattern] && r.Method == http.MethodGet && isWebSocketHandshake(r) && r.URL.Query().Has("token") {
		return r.URL.Query().Get("token")
	}
	return header
}

// headerToken returns the token of a request's Authorization header, and
// whether it has one at all (a header that holds no Bearer token has
// none: "", true; a bare "Bearer" is no header).
func headerToken(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" || strings.EqualFold(h, "Bearer") { // an empty one presents nothing
		return "", false
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(token), true
}

// twoTokens reports a request that presents two different tokens, or
// could: two Authorization headers, and on a WebSocket handshake two
// ?token= values or a header and a ?token= that differ (bearerToken
// presents none of them).
func twoTokens(r *http.Request) bool {
	if len(r.Header.Values("Authorization")) > 1 {
		return true
	}
	if !wsRoutes[r.Pattern] || !isWebSocketHandshake(r) {
		return false
	}
	qs := r.URL.Query()["token"]
	if len(qs) == 0 {
		return false
	}
	header, hasHeader := headerToken(r)
	for _, q := range qs {
		if q != qs[0] || (hasHeader && q != header) {
			return true
		}
	}
	return false
}

// wsRoutes are the patterns of the endpoints that are WebSockets, the
// only ones that take ?token= (bearerToken).
var wsRoutes = map[string]bool{
	"GET /v1/sessions/{id}/ws": true,
	"GET /v1/approvals/ws":     true,
}

// isWebSocketHandshake reports a request to upgrade to a WebSocket.
func isWebSocketHandshake(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
