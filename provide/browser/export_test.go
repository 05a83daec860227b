package browser

// NetNS returns the identity ("net:[…]") of the network namespace p's
// Chromium runs in, which names every process of its tree.
func NetNS(p *Provider) string { return p.netns }

// Observe makes the proxy of the Provider New starts with o call f with
// every request it receives, before it is checked.
func Observe(o *Options, f func(request string)) *Options {
	o.observe = f
	return o
}

// ShareNetwork makes New start Chromium in brain's own network namespace,
// unconfined, as before isolation: only to show what isolation stops.
func ShareNetwork(o *Options) *Options {
	o.shareNetwork = true
	return o
}
