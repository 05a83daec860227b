package store

import "time"

// Abandon stops l renewing its leases without releasing them, as a node
// that died would.
func Abandon(l *Leases) { l.abandon() }

// LeaseValidUntil returns until when x is valid.
func LeaseValidUntil(x *Lease) time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.validUntil
}
