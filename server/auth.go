package server

import (
	"encoding/base64"
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
	handshake := wsRoutes[r.Pattern] && r.Method == http.MethodGet && isWebSocketHandshake(r)
	for _, q := range r.URL.Query()["token"] {
		switch {
		case q == "":
		case handshake:
			return q
		default:
			// A token in the URL of any other request is refused, header
			// or not: the URL is logged by every proxy on the way, and a
			// header beside it is the request's word against its URL's
			// (an adversarial probe found the header served).
			return ""
		}
	}
	return header
}

// headerToken returns the token of a request's Authorization header, and
// whether it presents one at all: "Bearer" with a token does; an empty
// header or a bare "Bearer" does not, nor does another scheme (Basic,
// which a proxy in front of a browser may add: its WebSocket's ?token=
// is then the token); a header that is no scheme and token ("Bearer"
// glued to the token, a token alone) presents an empty one ("", true).
func headerToken(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" || strings.EqualFold(h, "Bearer") { // an empty one presents nothing
		return "", false
	}
	scheme, token, ok := strings.Cut(h, " ")
	switch {
	case !ok:
		return "", true
	case !strings.EqualFold(scheme, "Bearer"):
		return "", false
	}
	return strings.TrimSpace(token), true
}

// twoTokens reports a request that presents two different tokens, or
// could: two Authorization headers, and on a WebSocket handshake two
// ?token= values or a header and a ?token= that differ (bearerToken
// presents none of them).
func twoTokens(r *http.Request) bool {
	hs := r.Header.Values("Authorization")
	for _, h := range hs {
		if h != hs[0] { // the same one twice is one
			return true
		}
	}
	if !wsRoutes[r.Pattern] || !isWebSocketHandshake(r) {
		return false
	}
	header, hasHeader := headerToken(r)
	first := ""
	for _, q := range r.URL.Query()["token"] {
		switch {
		case q == "": // an empty ?token= presents nothing
		case first != "" && q != first, hasHeader && q != header:
			return true
		default:
			first = q
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

// handshakeProblem says why r is not a WebSocket handshake
// coder/websocket's Accept takes (RFC 6455, 4.2.1), with the status it
// answers: checked before a connection's session is made, since Accept
// checks only after.
func handshakeProblem(r *http.Request) (status int, why string) {
	hasToken := func(header, token string) bool {
		for _, v := range r.Header.Values(header) {
			for _, t := range strings.Split(v, ",") {
				if strings.EqualFold(strings.TrimSpace(t), token) {
					return true
				}
			}
		}
		return false
	}
	switch {
	case r.Method != http.MethodGet: // the route's GET takes HEAD too (a re-probe made sessions by HEAD)
		return http.StatusMethodNotAllowed, "a WebSocket handshake is a GET, not " + r.Method
	case !r.ProtoAtLeast(1, 1):
		return http.StatusUpgradeRequired, "a WebSocket handshake is HTTP/1.1 or later, not " + r.Proto
	case !hasToken("Connection", "Upgrade") || !hasToken("Upgrade", "websocket"):
		return http.StatusUpgradeRequired, "this endpoint is a WebSocket: the request needs Connection: Upgrade and Upgrade: websocket"
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return http.StatusBadRequest, "a WebSocket handshake of version 13 is wanted (Sec-WebSocket-Version: 13)"
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return http.StatusBadRequest, "a WebSocket handshake has one Sec-WebSocket-Key"
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0])); err != nil || len(k) != 16 {
		return http.StatusBadRequest, "the Sec-WebSocket-Key is not 16 bytes in base64"
	}
	return 0, ""
}
