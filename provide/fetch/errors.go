package fetch

import "net/netip"

// DeniedError says which grant rule refused a URL, a redirect or a
// connection. [Fetcher.Fetch] returns it as the cause of a
// *handle.CapabilityError with code denied; [Policy.CheckURL] and
// [Policy.DialContext] return it as is (wrapped, for a dial), so that other
// providers can report it under their own handle.
type DeniedError struct {
	// Rule is the grant field that refused: "allow_hosts", "schemes",
	// "ports", "allow_cidrs" or "max_redirects".
	Rule string
	// Msg says what was refused and names Rule. It is written for the
	// model and never names an address that a host name resolved to.
	Msg string
	// Addr is the refused address for an allow_cidrs denial, for logs.
	Addr netip.Addr

	class string // the address's range ("loopback"), for messages
}

// Error returns Msg.
func (e *DeniedError) Error() string { return e.Msg }
