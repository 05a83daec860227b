// Package fetch provides the net handle ([handle.Net]): HTTP and HTTPS
// requests under [Grants].
//
// A [Fetcher] refuses, with code denied, any request whose scheme, host or
// port the grants do not list, and any connection to an address that is
// loopback, private, link-local (cloud metadata at 169.254.169.254
// included), unspecified, multicast, reserved, or an IPv6 form that embeds
// such an IPv4 address — unless an allow_cidrs entry contains it. The
// address is checked at the socket, in [net.Dialer.Control], after name
// resolution: a name that resolves to 127.0.0.1 (DNS rebinding included)
// is refused just like the literal. Every redirect is checked again, the
// environment's proxy variables (HTTP_PROXY, HTTPS_PROXY) are ignored, and
// response bodies are capped.
//
//	f, err := fetch.New(fetch.Grants{AllowHosts: []string{"api.example.com"}}, nil)
//	if err != nil { ... }
//	defer f.Close()
//	resp, err := f.Fetch(ctx, handle.Request{URL: "https://api.example.com/v1/items"})
//
// The [Policy] a Fetcher enforces is exported so that other providers (the
// page handle's proxy) apply the very same host and address rules: compile
// one with [NewPolicy] and use [Policy.CheckURL] and [Policy.DialContext].
package fetch
