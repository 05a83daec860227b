// Package browser provides the page handle ([handle.Page]): a headless
// Chromium tab per call, under [Grants].
//
// [New] starts one Chromium and one HTTP proxy for the life of the
// [Provider]. Chromium runs in a network namespace of its own that holds
// only a loopback interface and the proxy's listening socket; the proxy
// dials out from brain's namespace. So the proxy is Chromium's only way
// out: WebRTC's STUN and TURN, QUIC, DNS and any other UDP or TCP cannot
// leave, whatever Chromium's flags do. (This needs Linux and CAP_SYS_ADMIN;
// without them New fails with unavailable rather than run Chromium
// unconfined.) Chromium sends every request through the proxy — the page,
// its redirects and subresources, scripts' fetches, WebSockets, and
// loopback too (--proxy-bypass-list=<-loopback>) — resolves no names
// itself, and makes no background requests of its own (component updates,
// safe browsing, sync and the like are turned off). The proxy checks each URL with [fetch.Policy.CheckURL] and
// connects only through [fetch.Policy.DialContext], which checks the address
// actually dialled: the page handle obeys exactly the net handle's host and
// address rules. Navigate also refuses every scheme but http and https.
//
//	p, err := browser.New(ctx, browser.Grants{Grants: fetch.Grants{AllowHosts: []string{"example.com"}}}, nil)
//	if err != nil { ... } // a *handle.CapabilityError "unavailable" when Chromium is missing
//	defer p.Close()
//	page, err := p.Open(ctx)
//	if err != nil { ... }
//	defer page.Close()
//	err = page.Navigate(ctx, "https://example.com/")
//	text, err := page.Text(ctx, "h1")
//
// Chromium comes from the Debian package "chromium"; the binary is
// /usr/lib/chromium/chromium (not the /usr/bin wrapper).
package browser
