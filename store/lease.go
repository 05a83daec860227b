package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// leaseBucket is the key-value bucket of session leases: key the
	// session id, value the holding node ([LeaseHolder], JSON). Its TTL is
	// the lease TTL: an entry its holder stops renewing expires.
	leaseBucket = "brain_session_leases"
	// defaultLeaseTTL is LeaseOptions.TTL's default.
	defaultLeaseTTL = 10 * time.Second
	// minLeaseTTL is the shortest lease TTL (JetStream expires messages
	// about once a second at best on a loaded server).
	minLeaseTTL = 500 * time.Millisecond
)

var (
	// ErrLeased reports a session whose lease another node holds; the
	// error is a [*LeasedError] naming the holder.
	ErrLeased = errors.New("store: session leased by another node")
	// ErrLeaseLost reports a lease that expired before its holder could
	// renew it, was taken by another node, or was released.
	ErrLeaseLost = errors.New("store: session lease lost")
)

// LeaseOptions configure [Store.Leases].
type LeaseOptions struct {
	// Node is this node's id, unique in the cluster: 1 to 128 of A-Z a-z
	// 0-9 _ -. A node restarted with the same id takes its own leases back
	// at once instead of waiting for them to expire.
	Node string
	// Addr is the address other nodes forward a session's connections to
	// (for example "http://10.0.0.5:8080"); recorded in each lease.
	Addr string
	// TTL is how long a lease lives without renewal, the same on every
	// node (it is the bucket's). Default 10 s, at least 500 ms. The holder
	// renews every TTL/3 and stops serving once 4/5 of the TTL has passed
	// since it sent its last successful renewal, so it has stopped before
	// the entry expires and another node can take it.
	TTL time.Duration
}

// LeaseHolder names the node holding a lease.
type LeaseHolder struct {
	Node string `json:"node"`
	Addr string `json:"addr,omitempty"`
}

// LeasedError reports a session leased by another node. It matches
// [ErrLeased] with errors.Is.
type LeasedError struct {
	Session string
	Holder  LeaseHolder
}

func (e *LeasedError) Error() string {
	return fmt.Sprintf("store: session %q is leased by node %q", e.Session, e.Holder.Node)
}

// Is reports target == ErrLeased.
func (e *LeasedError) Is(target error) bool { return target == ErrLeased }

// LeaseHolder returns the holding node and its address (for forwarding).
func (e *LeasedError) LeaseHolder() (node, addr string) { return e.Holder.Node, e.Holder.Addr }

// Leases grants this node leases on sessions: at most one node holds a
// session's lease at a time (compare-and-set on the entry's revision in a
// replicated key-value bucket), and the holder renews it while it lives.
// Its methods are safe for concurrent use.
type Leases struct {
	s     *Store
	kv    jetstream.KeyValue
	opts  LeaseOptions
	value []byte
	log   *slog.Logger

	mu     sync.Mutex
	held   map[string]*Lease
	closed bool

	stop chan struct{}
	done chan struct{}
}

// Leases opens the lease bucket (created with the store's replication
// factor) and starts renewing the leases this node will hold. Close it to
// release them (a graceful handover).
func (s *Store) Leases(ctx context.Context, opts *LeaseOptions) (*Leases, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	var o LeaseOptions
	if opts != nil {
		o = *opts
	}
	if _, err := subjectFor(o.Node); err != nil {
		return nil, fmt.Errorf("store: lease node id: %w", err)
	}
	if o.TTL == 0 {
		o.TTL = defaultLeaseTTL
	}
	if o.TTL < minLeaseTTL {
		return nil, fmt.Errorf("store: lease TTL %s is shorter than %s", o.TTL, minLeaseTTL)
	}
	value, err := json.Marshal(LeaseHolder{Node: o.Node, Addr: o.Addr})
	if err != nil {
		return nil, err
	}
	rctx, cancel := s.requestContext(ctx)
	defer cancel()
	kv, err := s.js.CreateOrUpdateKeyValue(rctx, jetstream.KeyValueConfig{
		Bucket:      leaseBucket,
		Description: "brain: which node owns each session",
		TTL:         o.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    s.opts.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("store: create bucket %s: %w", leaseBucket, err)
	}
	l := &Leases{s: s, kv: kv, opts: o, value: value, held: map[string]*Lease{},
		log:  s.log.With(slog.String("node", o.Node)),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.renewLoop()
	return l, nil
}

// Node returns this node's id.
func (l *Leases) Node() string { return l.opts.Node }

// TTL returns the lease TTL.
func (l *Leases) TTL() time.Duration { return l.opts.TTL }

// Lease is this node's hold on one session.
type Lease struct {
	l  *Leases
	id string

	mu         sync.Mutex
	rev        uint64
	validUntil time.Time
	err        error // set once lost
	lost       chan struct{}
}

// Acquire takes the session's lease for this node: it succeeds if no node
// holds it (or its holder let it expire), or this node id holds it from
// an earlier run. A lease held by another node is a [*LeasedError]. It
// waits at most the TTL (or Options.Timeout, if shorter) for the cluster.
func (l *Leases) Acquire(ctx context.Context, id string) (*Lease, error) {
	if _, err := subjectFor(id); err != nil {
		return nil, err
	}
	l.mu.Lock()
	closed, mine := l.closed, l.held[id]
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if mine != nil && mine.Valid() {
		return nil, fmt.Errorf("store: session %q: this node holds its lease already", id)
	}
	// Bounded by the TTL too: a node that cannot reach the cluster for
	// that long could not keep the lease anyway, and answers quickly.
	rctx, cancel := context.WithTimeout(ctx, min(l.opts.TTL, l.s.opts.Timeout))
	defer cancel()
	sent := time.Now()
	rev, err := l.kv.Create(rctx, id, l.value)
	if errors.Is(err, jetstream.ErrKeyExists) {
		var e jetstream.KeyValueEntry
		if e, err = l.kv.Get(rctx, id); errors.Is(err, jetstream.ErrKeyNotFound) {
			// Expired or released in between: try once more.
			sent = time.Now()
			rev, err = l.kv.Create(rctx, id, l.value)
		} else if err == nil {
			var h LeaseHolder
			if jerr := json.Unmarshal(e.Value(), &h); jerr != nil {
				return nil, fmt.Errorf("store: session %q: lease entry does not decode: %w", id, jerr)
			}
			if h.Node != l.opts.Node {
				return nil, &LeasedError{Session: id, Holder: h}
			}
			sent = time.Now()
			rev, err = l.kv.Update(rctx, id, l.value, e.Revision())
		}
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("%w: session %q: taken by another node while acquiring", ErrLeased, id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: session %q: acquire lease: %w", id, err)
	}
	x := &Lease{l: l, id: id, rev: rev, validUntil: sent.Add(l.validFor()), lost: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = x.Release(context.WithoutCancel(ctx))
		return nil, ErrClosed
	}
	l.held[id] = x
	l.mu.Unlock()
	return x, nil
}

// Holder returns the node holding the session's lease; ok is false when
// none does.
func (l *Leases) Holder(ctx context.Context, id string) (h LeaseHolder, ok bool, err error) {
	if _, err := subjectFor(id); err != nil {
		return h, false, err
	}
	rctx, cancel := l.s.requestContext(ctx)
	defer cancel()
	e, err := l.kv.Get(rctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("store: session %q: read lease: %w", id, err)
	}
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return h, false, fmt.Errorf("store: session %q: lease entry does not decode: %w", id, err)
	}
	return h, true, nil
}

// validFor is how long after sending a renewal this node trusts it.
func (l *Leases) validFor() time.Duration { return l.opts.TTL * 4 / 5 }

// Close stops renewing and releases every lease this node holds, so other
// nodes can take its sessions at once. It is idempotent.
func (l *Leases) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	held := make([]*Lease, 0, len(l.held))
	for _, x := range l.held {
		held = append(held, x)
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	var errs []error
	for _, x := range held {
		ctx, cancel := context.WithTimeout(context.Background(), l.s.opts.Timeout)
		errs = append(errs, x.Release(ctx))
		cancel()
	}
	return errors.Join(errs...)
}

// abandon stops renewing without releasing anything, as a node that died
// would: tests use it.
func (l *Leases) abandon() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
}

// renewLoop renews each held lease every TTL/3 and marks lost those it
// could not renew in time.
func (l *Leases) renewLoop() {
	defer close(l.done)
	tick := time.NewTicker(l.opts.TTL / 10)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		l.mu.Lock()
		held := make([]*Lease, 0, len(l.held))
		for _, x := range l.held {
			held = append(held, x)
		}
		l.mu.Unlock()
		// Concurrently, a bounded number at a time: one after another, a
		// node holding many sessions on a loaded cluster would let the last
		// ones lapse while it waits for the first ones' round trips.
		sem := make(chan struct{}, renewConcurrency)
		var wg sync.WaitGroup
		for _, x := range held {
			select {
			case <-l.stop:
				wg.Wait()
				return
			case sem <- struct{}{}:
			}
			wg.Go(func() {
				defer func() { <-sem }()
				x.renew()
			})
		}
		wg.Wait()
	}
}

// renewConcurrency bounds the renewals one node has in flight.
const renewConcurrency = 32

// renew renews x if its last renewal is a third of the TTL old, and marks
// it lost if it is past its validity.
func (x *Lease) renew() {
	x.mu.Lock()
	rev, until, gone := x.rev, x.validUntil, x.err != nil
	x.mu.Unlock()
	if gone {
		return
	}
	now := time.Now()
	if now.After(until) {
		x.lose(fmt.Errorf("%w: session %q: not renewed within %s", ErrLeaseLost, x.id, x.l.validFor()), true)
		return
	}
	if until.Sub(now) > x.l.validFor()-x.l.opts.TTL/3 {
		return // renewed recently
	}
	ctx, cancel := context.WithTimeout(context.Background(), until.Sub(now))
	defer cancel()
	newRev, err := x.l.kv.Update(ctx, x.id, x.l.value, rev)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		x.mu.Lock()
		if x.err == nil {
			x.rev, x.validUntil = newRev, now.Add(x.l.validFor())
		}
		x.mu.Unlock()
	case errors.Is(err, jetstream.ErrKeyExists),
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		x.lose(fmt.Errorf("%w: session %q: taken by another node", ErrLeaseLost, x.id), true)
	default:
		x.l.log.Warn("renew session lease", slog.String("session", x.id), slog.String(logKeyError, err.Error()))
	}
}

// lose marks x lost with err, once.
func (x *Lease) lose(err error, warn bool) {
	x.mu.Lock()
	first := x.err == nil
	if first {
		x.err = err
		close(x.lost)
	}
	x.mu.Unlock()
	if first {
		x.l.mu.Lock()
		if x.l.held[x.id] == x {
			delete(x.l.held, x.id)
		}
		x.l.mu.Unlock()
		if warn {
			x.l.log.Warn("session lease lost", slog.String("session", x.id), slog.String(logKeyError, err.Error()))
		}
	}
}

// Session returns the leased session's id.
func (x *Lease) Session() string { return x.id }

// Lost is closed when the lease is lost or released: stop serving the
// session.
func (x *Lease) Lost() <-chan struct{} { return x.lost }

// Err returns why the lease was lost (matching [ErrLeaseLost]), or nil.
func (x *Lease) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// Valid reports whether the lease is held and within its validity: a
// journal write checks it first, so a node that could not renew stops
// writing before another node can take the session.
func (x *Lease) Valid() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err == nil && time.Now().Before(x.validUntil)
}

// Release gives the lease up (deleting the entry only if this node still
// holds it), so another node can take the session at once. Lost is closed.
func (x *Lease) Release(ctx context.Context) error {
	x.mu.Lock()
	rev, wasLost := x.rev, x.err != nil
	x.mu.Unlock()
	x.lose(fmt.Errorf("%w: session %q: released", ErrLeaseLost, x.id), false)
	if wasLost {
		return nil
	}
	rctx, cancel := x.l.s.requestContext(ctx)
	defer cancel()
	err := x.l.kv.Delete(rctx, x.id, jetstream.LastRevision(rev))
	var apiErr *jetstream.APIError
	if err != nil && !(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
		return fmt.Errorf("store: session %q: release lease: %w", x.id, err)
	}
	return nil
}
