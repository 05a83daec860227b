package browser

import (
	"github.com/brainrt/brain/provide/fetch"
	"github.com/brainrt/brain/provide/grant"
)

// Defaults applied by [New] to zero-valued [Grants] fields.
const (
	DefaultBinary             = "/usr/lib/chromium/chromium"
	DefaultMaxScreenshotBytes = 8 << 20
)

// Grants is the policy of a page handle. The host rules are those of the net
// handle, embedded: allow_hosts, schemes, ports and allow_cidrs apply to every
// request the browser makes — the page, its redirects, its subresources,
// its scripts' fetches and WebSockets — because every one of them goes
// through the provider's proxy.
//
// The embedded fields mean, for a page:
//   - timeout bounds each operation (Navigate, Text, Evaluate, Screenshot);
//     default 30s;
//   - max_response_bytes caps what Text and Evaluate return; default 8 MiB;
//   - max_redirects is not used: Chromium follows redirects, and the proxy
//     checks each one as a new request.
type Grants struct {
	fetch.Grants `yaml:",inline"`
	// MaxScreenshotBytes caps a screenshot; a larger PNG fails with
	// too_large. Default: 8 MiB.
	MaxScreenshotBytes int64 `yaml:"max_screenshot_bytes"`
	// Binary is the Chromium executable. Default:
	// /usr/lib/chromium/chromium (Debian's package "chromium"; not the
	// /usr/bin/chromium wrapper script).
	Binary string `yaml:"binary"`
}

// Validate reports the first problem in g as a *[grant.FieldError] naming
// the YAML field, or nil. It does not look for the binary: [New] does.
func (g Grants) Validate() error {
	if err := g.Grants.Validate(); err != nil {
		return err
	}
	if g.MaxScreenshotBytes < 0 {
		return grant.Errorf("max_screenshot_bytes", "%d: must not be negative", g.MaxScreenshotBytes)
	}
	return nil
}

// withDefaults returns g with zero fields set to their defaults.
func (g Grants) withDefaults() Grants {
	if g.MaxScreenshotBytes == 0 {
		g.MaxScreenshotBytes = DefaultMaxScreenshotBytes
	}
	if g.Binary == "" {
		g.Binary = DefaultBinary
	}
	if g.Timeout == 0 {
		g.Timeout = fetch.DefaultTimeout
	}
	if g.MaxResponseBytes == 0 {
		g.MaxResponseBytes = fetch.DefaultMaxResponseBytes
	}
	return g
}
