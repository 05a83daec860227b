package fetch

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/brainrt/brain/provide/grant"
)

// Defaults applied by [New] and [NewPolicy] to zero-valued [Grants] fields.
const (
	DefaultMaxResponseBytes int64         = 8 << 20
	DefaultTimeout          time.Duration = 30 * time.Second
	DefaultMaxRedirects     int           = 5
)

// Grants is the policy of a net handle: where it may connect and within
// which bounds. The tool never sees it. The zero value of every field but
// AllowHosts means its default.
type Grants struct {
	// AllowHosts lists the hosts a request may name: exact names
	// ("api.example.com"), IP addresses ("192.0.2.7", "2001:db8::1"), or
	// "*.example.com", which matches every name below example.com but not
	// example.com itself. "*" alone and wildcards over a public suffix
	// ("*.com", "*.co.uk", "*.github.io") are refused by [Grants.Validate]:
	// anybody can register a name there. Names are ASCII (use the xn--
	// form of an internationalised name) and compared case-insensitively.
	AllowHosts []string `yaml:"allow_hosts"`
	// Schemes lists the URL schemes allowed: "https" and/or "http".
	// Default: [https].
	Schemes []string `yaml:"schemes"`
	// Ports lists the TCP ports allowed, for every scheme. Default: 443
	// for https and 80 for http.
	Ports []int `yaml:"ports"`
	// AllowCIDRs lists address ranges that may be dialled although they
	// are otherwise denied (loopback, private, link-local, ...): a
	// connection to such an address is allowed only inside one of these.
	// Addresses in CIDR notation ("10.1.0.0/16", "127.0.0.1/32"); a
	// prefix of length 0 is refused.
	AllowCIDRs []string `yaml:"allow_cidrs"`
	// MaxResponseBytes caps a response body; a longer one fails with
	// too_large. Default: 8 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// Timeout bounds a whole request: connecting, every redirect, and
	// reading the body. Default: 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRedirects is how many redirects a request may follow; one more
	// fails with denied. -1 follows none: the 3xx response is returned.
	// Default: 5.
	MaxRedirects int `yaml:"max_redirects"`
}

// Validate reports the first problem in g as a *[grant.FieldError] naming
// the YAML field ("allow_hosts[1]", "ports[0]", "timeout"), or nil.
func (g Grants) Validate() error {
	if len(g.AllowHosts) == 0 {
		return grant.Errorf("allow_hosts", "list at least one host")
	}
	for i, h := range g.AllowHosts {
		if _, err := parseHostPattern(h); err != nil {
			return grant.Errorf(fmt.Sprintf("allow_hosts[%d]", i), "%q: %v", h, err)
		}
	}
	for i, s := range g.Schemes {
		if s != "http" && s != "https" {
			return grant.Errorf(fmt.Sprintf("schemes[%d]", i), "%q: want http or https", s)
		}
	}
	for i, p := range g.Ports {
		if p < 1 || p > 65535 {
			return grant.Errorf(fmt.Sprintf("ports[%d]", i), "%d: want a port from 1 to 65535", p)
		}
	}
	for i, c := range g.AllowCIDRs {
		if _, err := parseCIDR(c); err != nil {
			return grant.Errorf(fmt.Sprintf("allow_cidrs[%d]", i), "%q: %v", c, err)
		}
	}
	if g.MaxResponseBytes < 0 {
		return grant.Errorf("max_response_bytes", "%d: must not be negative", g.MaxResponseBytes)
	}
	if g.Timeout < 0 {
		return grant.Errorf("timeout", "%s: must not be negative", g.Timeout)
	}
	if g.MaxRedirects < -1 {
		return grant.Errorf("max_redirects", "%d: want -1 (follow none) or more", g.MaxRedirects)
	}
	return nil
}

// withDefaults returns g with zero fields set to their defaults.
func (g Grants) withDefaults() Grants {
	if len(g.Schemes) == 0 {
		g.Schemes = []string{"https"}
	}
	if g.MaxResponseBytes == 0 {
		g.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if g.Timeout == 0 {
		g.Timeout = DefaultTimeout
	}
	if g.MaxRedirects == 0 {
		g.MaxRedirects = DefaultMaxRedirects
	}
	return g
}

// hostPattern is one compiled allow_hosts entry: exactly one of its fields
// is set.
type hostPattern struct {
	name   string     // exact name, lower case, no trailing dot
	suffix string     // ".example.com" for "*.example.com"
	addr   netip.Addr // an IP literal
}

// parseHostPattern compiles one allow_hosts entry.
func parseHostPattern(s string) (hostPattern, error) {
	h := strings.ToLower(strings.TrimSuffix(s, "."))
	switch {
	case h == "":
		return hostPattern{}, fmt.Errorf("empty host")
	case h == "*" || h == "*.":
		return hostPattern{}, fmt.Errorf("\"*\" would allow every host; list the hosts")
	case strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]"):
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return hostPattern{}, fmt.Errorf("not an IPv6 address")
		}
		return hostPattern{addr: a}, nil
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return hostPattern{}, fmt.Errorf("an address with a zone cannot be allowed")
		}
		return hostPattern{addr: a}, nil
	}
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		if err := checkHostName(rest); err != nil {
			return hostPattern{}, err
		}
		// Why: a wildcard over a public suffix ("*.com", "*.co.uk",
		// "*.github.io") covers names that anyone can register. An
		// unknown top-level domain counts as a public suffix too.
		if ps, _ := publicsuffix.PublicSuffix(rest); ps == rest {
			return hostPattern{}, fmt.Errorf("%q is a public suffix: a wildcard over it allows names anyone can register", rest)
		}
		return hostPattern{suffix: "." + rest}, nil
	}
	if err := checkHostName(h); err != nil {
		return hostPattern{}, err
	}
	return hostPattern{name: h}, nil
}

// parseCIDR compiles one allow_cidrs entry.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("want an address range in CIDR notation, such as 10.0.0.0/8 or 127.0.0.1/32")
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("a prefix of length 0 would allow every address; list the ranges you need")
	}
	// Why unmap: connections to ::ffff:a.b.c.d are checked as a.b.c.d, so
	// a mapped prefix must be compared in the same form.
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// checkHostName reports why h (lower case, no trailing dot) is not a DNS
// host name we accept.
func checkHostName(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("a host name is at most 253 characters")
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("each dot-separated part of a host name has 1 to 63 characters")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return fmt.Errorf("not ASCII: write an internationalised name in its xn-- form")
			case c == '*':
				return fmt.Errorf("only a leading \"*.\" wildcard is allowed")
			default:
				return fmt.Errorf("%q is not allowed in a host name", c)
			}
		}
	}
	if endsInNumber(labels[len(labels)-1]) {
		return fmt.Errorf("a numeric address form; write an IPv4 address as four decimal numbers (127.0.0.1)")
	}
	return nil
}

// endsInNumber reports whether label, the last label of a host, is a
// number: decimal digits, or 0x followed by hex digits. Why: URL parsers
// (WHATWG) and inet_aton read such hosts as IPv4 addresses — 2130706433,
// 0x7f000001, 127.1 and 0177.0.0.1 all mean 127.0.0.1 — while Go's URL
// parser and resolver may treat them as names. A host that ends in a number
// is therefore never a name we pass on.
func endsInNumber(label string) bool {
	if label == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(label, "0x"); ok {
		for i := 0; i < len(rest); i++ {
			if !isHex(rest[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(label); i++ {
		if label[i] < '0' || label[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
