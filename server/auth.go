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
	header, hasHeader := headerToken(r)
	if wsRoutes[r.Pattern] && r.Method == http.MethodGet && isWebSocketHandshake(r) && r.URL.Query().Has("token") {
		if q := r.URL.Query().Get("token"); !hasHeader || q == header {
			return q
		}
		return ""
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

// twoTokens reports a WebSocket handshake whose Authorization header and
// ?token= differ (bearerToken presents neither).
func twoTokens(r *http.Request) bool {
	header, hasHeader := headerToken(r)
	return hasHeader && wsRoutes[r.Pattern] && isWebSocketHandshake(r) && r.URL.Query().Has("token") && r.URL.Query().Get("token") != header
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
