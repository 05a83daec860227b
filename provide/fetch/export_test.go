package fetch

import (
	"errors"
	"net/netip"
	"syscall"
)

// SafetyNet makes p refuse, after its own check, any connection to an
// address that is not loopback, and calls report with it. Why: the attack
// tests aim at addresses such as 169.254.169.254; if the policy regressed,
// they must fail without sending a packet off this machine.
func SafetyNet(p *Policy, report func(address string)) {
	inner := p.dialer.Control
	p.dialer.Control = func(network, address string, c syscall.RawConn) error {
		if err := inner(network, address, c); err != nil {
			return err
		}
		if ap, err := netip.ParseAddrPort(address); err != nil || !ap.Addr().Unmap().IsLoopback() {
			report(address)
			return errors.New("test safety net: refused a connection to a non-loopback address")
		}
		return nil
	}
}
