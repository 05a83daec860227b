package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Resolver looks up the addresses of a host name. *net.Resolver implements
// it; tests inject a fixed map.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures [New] and [NewPolicy]. A nil *Options means defaults.
type Options struct {
	// Logger receives a record for each request a Fetcher denies. Nil
	// discards. NewPolicy does not log.
	Logger *slog.Logger
	// Resolver resolves host names. Nil means net.DefaultResolver.
	Resolver Resolver
}

// Policy is compiled [Grants]: the host, scheme, port and address rules of
// a net handle, without the HTTP client. It is immutable and safe for
// concurrent use.
//
// A provider that makes its own connections (the page handle's proxy)
// checks each URL with [Policy.CheckURL] and dials only through
// [Policy.DialContext], which checks every address it connects to.
type Policy struct {
	names    map[string]bool     // exact host names
	suffixes []string            // ".example.com" for "*.example.com"
	addrs    map[netip.Addr]bool // IP literals in allow_hosts
	schemes  map[string]bool
	ports    map[int]bool // nil: the scheme's default port only
	cidrs    []netip.Prefix
	resolver Resolver
	dialer   net.Dialer
}

// NewPolicy validates g and compiles it. Errors are *[grant.FieldError]
// from [Grants.Validate].
func NewPolicy(g Grants, opts *Options) (*Policy, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	g = g.withDefaults()
	p := &Policy{
		names:    map[string]bool{},
		addrs:    map[netip.Addr]bool{},
		schemes:  map[string]bool{},
		resolver: net.DefaultResolver,
	}
	if opts != nil && opts.Resolver != nil {
		p.resolver = opts.Resolver
	}
	for _, h := range g.AllowHosts {
		hp, _ := parseHostPattern(h) // validated above
		switch {
		case hp.name != "":
			p.names[hp.name] = true
		case hp.suffix != "":
			p.suffixes = append(p.suffixes, hp.suffix)
		default:
			p.addrs[hp.addr] = true
		}
	}
	for _, s := range g.Schemes {
		p.schemes[s] = true
	}
	if len(g.Ports) > 0 {
		p.ports = map[int]bool{}
		for _, n := range g.Ports {
			p.ports[n] = true
		}
	}
	for _, c := range g.AllowCIDRs {
		pr, _ := parseCIDR(c) // validated above
		p.cidrs = append(p.cidrs, pr)
	}
	// Why Control: it runs on the socket after the address is final and
	// before connect(2), so whatever resolved the name, and however often
	// it answered (DNS rebinding), the address actually dialled is the one
	// checked.
	p.dialer.Control = p.control
	return p, nil
}

// CheckURL reports whether u's scheme, host and port are allowed, as a
// *[DeniedError], or nil. It does not resolve the host: addresses are
// checked when [Policy.DialContext] connects.
//
// A host that ends in a number but is not a plain IPv4 address
// (2130706433, 0x7f000001, 127.1, 0177.0.0.1) is always refused, and so is
// a non-ASCII host.
func (p *Policy) CheckURL(u *url.URL) error {
	scheme := strings.ToLower(u.Scheme)
	if scheme == "" {
		return &DeniedError{Rule: "schemes", Msg: fmt.Sprintf("URL %q has no scheme (schemes)", u.Redacted())}
	}
	if !p.schemes[scheme] {
		return &DeniedError{Rule: "schemes", Msg: fmt.Sprintf("scheme %q is not allowed (schemes: %s)", scheme, strings.Join(slices.Sorted(maps.Keys(p.schemes)), ", "))}
	}
	if err := p.checkHost(u.Hostname()); err != nil {
		return err
	}
	port := defaultPort(scheme)
	if s := u.Port(); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			return &DeniedError{Rule: "ports", Msg: fmt.Sprintf("port %q is not a valid port (ports)", s)}
		}
		port = n
	}
	if !p.portAllowed(scheme, port) {
		return &DeniedError{Rule: "ports", Msg: fmt.Sprintf("port %d is not allowed for %s (ports)", port, scheme)}
	}
	return nil
}

// CheckAddr reports whether a connection to a may be made, as a
// *[DeniedError], or nil: a is allowed when an allow_cidrs entry contains
// it, or when it is none of loopback, private, CGNAT, link-local,
// unspecified, multicast, broadcast, reserved or documentation ranges, IPv6
// unique-local or site-local, or an IPv6 form (IPv4-mapped, NAT64, 6to4,
// Teredo) of a denied IPv4 address. An address with a zone is denied.
func (p *Policy) CheckAddr(a netip.Addr) error {
	if a.Zone() != "" {
		return &DeniedError{Rule: "allow_cidrs", Msg: fmt.Sprintf("address %s has a zone, which is not allowed (allow_cidrs)", a), Addr: a, class: "zoned"}
	}
	a = a.Unmap()
	for _, c := range p.cidrs {
		if c.Contains(a) {
			return nil
		}
	}
	if class := classify(a); class != "" {
		return &DeniedError{Rule: "allow_cidrs", Msg: fmt.Sprintf("address %s is not allowed: %s (allow_cidrs)", a, class), Addr: a, class: class}
	}
	return nil
}

// DialContext connects to addr ("host:port") over TCP, for use as
// [net/http.Transport.DialContext]. It checks the host against allow_hosts
// and the port against ports, resolves a name with the policy's resolver,
// and connects to the addresses in turn; each is checked by
// [Policy.CheckAddr] on the socket before connect(2). A refusal is a
// *[DeniedError] in the returned error's chain.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var ipNet string
	switch network {
	case "tcp":
		ipNet = "ip"
	case "tcp4":
		ipNet = "ip4"
	case "tcp6":
		ipNet = "ip6"
	default:
		return nil, fmt.Errorf("dial %s %s: only tcp is supported", network, addr)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return nil, &DeniedError{Rule: "ports", Msg: fmt.Sprintf("port %q is not a valid port (ports)", portStr)}
	}
	if !p.anyPortAllowed(port) {
		return nil, &DeniedError{Rule: "ports", Msg: fmt.Sprintf("port %d is not allowed (ports)", port)}
	}
	if err := p.checkHost(host); err != nil {
		return nil, err
	}
	literal, litErr := netip.ParseAddr(host)
	var addrs []netip.Addr
	if litErr == nil {
		addrs = []netip.Addr{literal}
	} else {
		addrs, err = p.resolver.LookupNetIP(ctx, ipNet, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %q: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %q: %w", host, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true})
		}
	}
	var firstErr error
	for _, a := range addrs {
		conn, err := p.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		var de *DeniedError
		if errors.As(err, &de) && litErr != nil {
			// Why: the model named a host, not this address; telling it
			// the address would let it map internal names.
			err = &DeniedError{Rule: de.Rule, Msg: fmt.Sprintf("host %q resolves to an address that is not allowed: %s (allow_cidrs)", host, de.class), Addr: de.Addr, class: de.class}
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// control is the dialer's Control hook: see [Policy.CheckAddr].
func (p *Policy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DeniedError{Rule: "allow_cidrs", Msg: fmt.Sprintf("address %q cannot be checked (allow_cidrs)", address), class: "unparsable"}
	}
	return p.CheckAddr(ap.Addr())
}

// checkHost reports whether host (as in a URL, without brackets) is allowed
// by allow_hosts.
func (p *Policy) checkHost(host string) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "" {
		return &DeniedError{Rule: "allow_hosts", Msg: "the URL has no host (allow_hosts)"}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if p.addrs[a] {
			return nil
		}
		return &DeniedError{Rule: "allow_hosts", Msg: fmt.Sprintf("host %q is not allowed (allow_hosts)", host)}
	}
	if err := checkHostName(h); err != nil {
		return &DeniedError{Rule: "allow_hosts", Msg: fmt.Sprintf("host %q is refused: %v (allow_hosts)", host, err)}
	}
	if p.names[h] {
		return nil
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return nil
		}
	}
	return &DeniedError{Rule: "allow_hosts", Msg: fmt.Sprintf("host %q is not allowed (allow_hosts)", host)}
}

func (p *Policy) portAllowed(scheme string, port int) bool {
	if p.ports != nil {
		return p.ports[port]
	}
	return port == defaultPort(scheme)
}

func (p *Policy) anyPortAllowed(port int) bool {
	for s := range p.schemes {
		if p.portAllowed(s, port) {
			return true
		}
	}
	return false
}

func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}
