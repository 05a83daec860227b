package browser

// ProxyAddr returns the "127.0.0.1:port" of p's proxy, which names p's
// Chromium processes on their command line (--proxy-server).
func ProxyAddr(p *Provider) string { return p.proxy.addr() }
