package server

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// hostOK is the console's DNS-rebinding check: the request's Host must be
// an IP literal, localhost, or one of the names the console is configured
// to answer to. A page on an attacker's domain that resolves to 127.0.0.1
// reaches the console's port with its own name in Host, and is refused
// before anything else runs. The port is not checked (a proxy may serve
// the console on another one).
func (c *Console) hostOK(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(host, "]"), "["), "."))
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" {
		return true
	}
	for _, h := range c.opts.Hosts {
		if host == h {
			return true
		}
	}
	return false
}

// signInLimiter bounds sign-in attempts per client address: a token bucket
// of signInBurst attempts, refilled at one every signInEvery. An attempt
// over the limit is refused without its token being looked at, so that
// guessing goes no faster than the limit whatever the guesses. IPv6
// addresses count by /64, the block one host usually has. The table holds
// at most signInAddrs addresses; when it is full of addresses still
// limited, a new address is refused too (fail closed).
type signInLimiter struct {
	mu      sync.Mutex
	buckets map[netip.Prefix]*bucket
	now     func() time.Time
}

const (
	signInBurst = 10
	signInEvery = 6 * time.Second
	signInAddrs = 4096
	signInRate  = float64(time.Second) / float64(signInEvery) // attempts per second
)

func newSignInLimiter(now func() time.Time) *signInLimiter {
	return &signInLimiter{buckets: map[netip.Prefix]*bucket{}, now: now}
}

// clientPrefix is the address a request counts against.
func clientPrefix(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	var a netip.Addr
	if err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(remoteAddr); err != nil {
		return netip.Prefix{} // unknown: all such requests share one bucket
	}
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// allow takes one attempt for remoteAddr; when refused it says how long
// until the next attempt is allowed.
func (l *signInLimiter) allow(remoteAddr string) (bool, time.Duration) {
	key := clientPrefix(remoteAddr)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= signInAddrs {
			l.pruneLocked(now)
		}
		if len(l.buckets) >= signInAddrs {
			return false, signInEvery
		}
		b = newBucket(signInRate, signInBurst, now) // limits.go's bucket
		l.buckets[key] = b
	}
	if !b.take(now) {
		return false, time.Duration((1 - b.tokens) / signInRate * float64(time.Second))
	}
	return true, 0
}

// pruneLocked forgets the addresses whose buckets have refilled: they are
// what a new bucket would be.
func (l *signInLimiter) pruneLocked(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*signInRate >= signInBurst {
			delete(l.buckets, k)
		}
	}
}
