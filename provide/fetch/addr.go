package fetch

import "net/netip"

// addrRule names a range of addresses that is denied unless an allow_cidrs
// entry contains the address.
type addrRule struct {
	prefix netip.Prefix
	class  string
}

func rule(cidr, class string) addrRule {
	return addrRule{prefix: netip.MustParsePrefix(cidr), class: class}
}

// deniedV4 lists the IPv4 ranges that are not the public internet. Order
// matters only for the class named in messages: the first match wins.
var deniedV4 = []addrRule{
	// 0.0.0.0 connects to the local host on Linux.
	rule("0.0.0.0/8", "unspecified"),
	rule("10.0.0.0/8", "private"),
	rule("100.64.0.0/10", "shared (CGNAT)"),
	rule("127.0.0.0/8", "loopback"),
	// Cloud metadata services live at 169.254.169.254.
	rule("169.254.0.0/16", "link-local"),
	rule("172.16.0.0/12", "private"),
	rule("192.0.0.0/24", "reserved"),
	rule("192.0.2.0/24", "documentation"),
	rule("192.88.99.0/24", "reserved"),
	rule("192.168.0.0/16", "private"),
	rule("198.18.0.0/15", "benchmarking"),
	rule("198.51.100.0/24", "documentation"),
	rule("203.0.113.0/24", "documentation"),
	rule("224.0.0.0/4", "multicast"),
	rule("255.255.255.255/32", "broadcast"),
	rule("240.0.0.0/4", "reserved"),
}

// deniedV6 lists the IPv6 ranges that are not the public internet, except
// the forms that embed an IPv4 address, which embeddedV4 handles.
var deniedV6 = []addrRule{
	rule("::/128", "unspecified"),
	rule("::1/128", "loopback"),
	// Deprecated IPv4-compatible addresses (::a.b.c.d).
	rule("::/96", "reserved"),
	rule("64:ff9b:1::/48", "NAT64 (local use)"),
	rule("100::/64", "discard"),
	rule("2001:db8::/32", "documentation"),
	rule("fc00::/7", "unique local (private)"),
	rule("fe80::/10", "link-local"),
	rule("fec0::/10", "site-local"),
	rule("ff00::/8", "multicast"),
}

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
	teredo = netip.MustParsePrefix("2001::/32")
)

// v4At returns the IPv4 address in b[at:at+4].
func v4At(b [16]byte, at int) netip.Addr {
	return netip.AddrFrom4([4]byte{b[at], b[at+1], b[at+2], b[at+3]})
}

// classify returns why a is denied ("loopback", "private", ...), or "" when
// a is a public address. a must be unmapped (see [netip.Addr.Unmap]).
func classify(a netip.Addr) string {
	if a.Is4() {
		for _, r := range deniedV4 {
			if r.prefix.Contains(a) {
				return r.class
			}
		}
		return ""
	}
	for _, r := range deniedV6 {
		if r.prefix.Contains(a) {
			return r.class
		}
	}
	// Why: a NAT64 gateway, a 6to4 relay or a Teredo server may turn these
	// into connections to the IPv4 address they embed.
	for _, v4 := range embeddedV4(a) {
		if c := classify(v4); c != "" {
			return c + " (embedded in an IPv6 address)"
		}
	}
	return ""
}

// embeddedV4 returns the IPv4 addresses that a NAT64 (64:ff9b::/96), 6to4
// (2002::/16) or Teredo (2001::/32) address carries.
func embeddedV4(a netip.Addr) []netip.Addr {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return []netip.Addr{v4At(b, 12)}
	case sixTo4.Contains(a):
		return []netip.Addr{v4At(b, 2)}
	case teredo.Contains(a):
		// The server address is in bits 32-63; the client's is stored
		// inverted in the last 32 bits.
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return []netip.Addr{v4At(b, 4), netip.AddrFrom4(client)}
	}
	return nil
}
