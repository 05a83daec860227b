package store

// Abandon stops l renewing its leases without releasing them, as a node
// that died would.
func Abandon(l *Leases) { l.abandon() }
