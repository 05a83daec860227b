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
// scheme, "Bearer" without a space — presents no token.
func bearerToken(r *http.Request) string {
	if h := strings.TrimSpace(r.Header.Get("Authorization")); h != "" && !strings.EqualFold(h, "Bearer") {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return ""
		}
		return strings.TrimSpace(token)
	}
	if wsRoutes[r.Pattern] && r.Method == http.MethodGet && isWebSocketHandshake(r) {
		return r.URL.Query().Get("token")
	}
	return ""
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
