// Package browser provides the page handle ([handle.Page]): a headless
// Chromium tab per call, under [Grants].
//
// [New] starts one Chromium and one HTTP proxy on 127.0.0.1 for the life of
// the [Provider]. Chromium sends every request through the proxy — the
// page, its redirects and subresources, scripts' fetches, WebSockets, and
// loopback too (--proxy-bypass-list=<-loopback>) — and resolves no names
// itself. The proxy checks each URL with [fetch.Policy.CheckURL] and
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
