package server

import (
	"net/http"
	"strings"
)

// bearerToken returns the token a request presents: "Authorization: Bearer
// <token>", or — for a WebSocket handshake only — the query parameter
// "token". Browsers' WebSocket API cannot set headers, so a web page has no
// other way to authenticate its WebSocket; every other endpoint (MCP, the
// sessions API) is reached with fetch or an HTTP client that can, and
// refuses a token in its URL, where it would end up in proxies' and
// servers' access logs. docs/protocol.md ("Authentication") has the why.
func bearerToken(r *http.Request) string {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(h) >= len("Bearer") && strings.EqualFold(h[:len("Bearer")], "Bearer") {
		h = strings.TrimSpace(h[len("Bearer"):])
	}
	if h != "" {
		return h
	}
	if isWebSocketHandshake(r) {
		return r.URL.Query().Get("token")
	}
	return ""
}

// isWebSocketHandshake reports a request to upgrade to a WebSocket.
func isWebSocketHandshake(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
