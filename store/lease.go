package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// leaseBucket is the key-value bucket of session leases: key the
	// session id, value the holding node ([LeaseHolder], JSON). Its TTL is
	// the lease TTL: an entry its holder stops renewing expires.
	leaseBucket = "brain_session_leases"
	// defaultLeaseTTL is LeaseOptions.TTL's default: long enough that the
	// window a lease rides out (electionWindow) covers a JetStream leader
	// election, 4 to 9 s after the leader's last heartbeat (docs/cluster.md,
	// "Choosing the lease TTL").
	defaultLeaseTTL = 20 * time.Second
	// minLeaseTTL is the shortest lease TTL (JetStream expires messages
	// about once a second at best on a loaded server).
	minLeaseTTL = 500 * time.Millisecond
	// renewAttempt bounds one renewal's request: one sent to a leader that
	// just died is never answered.
	renewAttempt = time.Second
)

// ElectionTTL is the shortest lease TTL that rides out a JetStream leader
// election: its window (23/40 of the TTL, electionWindow) covers 10 s —
// nats-server's longest election timeout, 9 s after the leader's last
// heartbeat, and a second to elect and answer.
const ElectionTTL = 18 * time.Second

// electionWindow is how long a lease of this TTL rides out a store that
// stops answering at the worst moment (just before a renewal was due):
// its validity (4/5 TTL) less the renewal period (TTL/5) and the renewal
// loop's tick (TTL/40).
func electionWindow(ttl time.Duration) time.Duration { return ttl*4/5 - ttl/5 - ttl/40 }

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
	// node (it is the bucket's). Default 20 s, at least 500 ms. The holder
	// renews every TTL/5 — a renewal that fails (a stream between leaders)
	// is retried with backoff — and stops serving once 4/5 of the TTL has
	// passed since it sent its last successful renewal, so it has stopped
	// before the entry expires and another node can take it. A lease thus
	// rides out a store that does not answer for 23/40 of the TTL (11.5 s
	// of the default 20 s, 1.7 s of a 3 s TTL): at least [ElectionTTL]
	// rides out a JetStream leader election. Zero means the lease
	// bucket's TTL if it exists (every node must agree), 20 s if not.
	TTL time.Duration
}

// LeaseHolder names the node holding a lease.
type LeaseHolder struct {
	Node string `json:"node"`
	Addr string `json:"addr,omitempty"`
}

// leaseEntry is a lease entry's value: the holder and the run of the
// holder (random per [Leases]).
type leaseEntry struct {
	Node string `json:"node"`
	Addr string `json:"addr,omitempty"`
	Run  string `json:"run,omitempty"`
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
	if o.TTL != 0 && o.TTL < minLeaseTTL {
		return nil, fmt.Errorf("store: lease TTL %s is shorter than %s", o.TTL, minLeaseTTL)
	}
	// The entry names this run of the node too: a renewal that finds the
	// entry changed tells its own lost write (the same value) from a
	// restart of the same node id, which takes the lease back.
	value, err := json.Marshal(leaseEntry{Node: o.Node, Addr: o.Addr, Run: rand.Text()})
	if err != nil {
		return nil, err
	}
	rctx, cancel := s.requestContext(ctx)
	defer cancel()
	var kv jetstream.KeyValue
	if o.TTL == 0 {
		// No TTL asked for: a cluster's bucket keeps the TTL it has (a
		// cluster started before the default changed keeps its own, and
		// every node agrees on it).
		if kv, err = s.js.KeyValue(rctx, leaseBucket); err == nil {
			st, serr := kv.Status(rctx)
			if serr != nil {
				return nil, fmt.Errorf("store: read bucket %s: %w", leaseBucket, serr)
			}
			o.TTL = st.TTL()
		} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("store: open bucket %s: %w", leaseBucket, err)
		} else {
			kv, o.TTL = nil, defaultLeaseTTL
		}
	}
	if kv == nil {
		if kv, err = s.js.CreateOrUpdateKeyValue(rctx, jetstream.KeyValueConfig{
			Bucket:      leaseBucket,
			Description: "brain: which node owns each session",
			TTL:         o.TTL,
			Storage:     jetstream.FileStorage,
			Replicas:    s.opts.Replicas,
		}); err != nil {
			return nil, fmt.Errorf("store: create bucket %s: %w", leaseBucket, err)
		}
	}
	if o.TTL < ElectionTTL {
		s.log.Warn("session leases: a TTL this short does not ride out a NATS leader election (4-9 s): a crash of the NATS server leading the lease bucket loses leases",
			slog.Duration("ttl", o.TTL), slog.Duration("rides_out", electionWindow(o.TTL)), slog.Duration("want_at_least", ElectionTTL))
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
	// Renewal retries: failures since the last success, when the next
	// attempt may go, and the last failure.
	failures int
	nextTry  time.Time
	lastErr  error
}

// Acquire takes the session's lease for this node: it succeeds if no node
// holds it (or its holder let it expire), or this node id holds it from
// an earlier run. A lease held by another node is a [*LeasedError]. A
// cluster between leaders is ridden out (up to 15 s, or ctx's deadline);
// a store that is unreachable or has no quorum fails at once with an
// [*UnavailableError].
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
	var rev uint64
	var sent time.Time
	var leased *LeasedError
	op := fmt.Sprintf("acquire the lease of session %q", id)
	err := l.s.retry(ctx, op, func(ctx context.Context) error {
		var err error
		sent = time.Now()
		rev, err = l.kv.Create(ctx, id, l.value)
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		// Held (by another node, by this node id from an earlier run, or
		// by this very acquire whose earlier attempt's answer was lost).
		e, err := l.readLease(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return errAgain // expired or released in between
		} else if err != nil {
			return err
		}
		var h LeaseHolder
		if jerr := json.Unmarshal(e.value, &h); jerr != nil {
			return fmt.Errorf("store: session %q: lease entry does not decode: %w", id, jerr)
		}
		if h.Node != l.opts.Node {
			leased = &LeasedError{Session: id, Holder: h}
			return leased
		}
		sent = time.Now()
		rev, err = l.kv.Update(ctx, id, l.value, e.revision)
		if isRevisionMismatch(err) {
			// The entry changed since it was read: taken by another node
			// (the next attempt reads it and says so), or renewed by this
			// node id's earlier run, still alive, which the next attempt
			// takes it from.
			return errAgain
		}
		return err
	})
	switch {
	case leased != nil && errors.Is(err, ErrLeased):
		return nil, leased
	case errors.Is(err, ErrLeased), errors.Is(err, ErrUnavailable):
		return nil, err
	case err != nil:
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
	var e kvEntry
	err = l.s.retry(ctx, fmt.Sprintf("read the lease of session %q", id), func(ctx context.Context) error {
		var err error
		e, err = l.readLease(ctx, id)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("store: session %q: read lease: %w", id, err)
	}
	if err := json.Unmarshal(e.value, &h); err != nil {
		return h, false, fmt.Errorf("store: session %q: lease entry does not decode: %w", id, err)
	}
	return h, true, nil
}

// validFor is how long after sending a renewal this node trusts it.
func (l *Leases) validFor() time.Duration { return l.opts.TTL * 4 / 5 }

// renewAfter is how old a renewal is when the next one is sent.
func (l *Leases) renewAfter() time.Duration { return l.opts.TTL / 5 }

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
	ctx, cancel := context.WithTimeout(context.Background(), l.s.opts.Timeout)
	defer cancel()
	for _, x := range held {
		errs = append(errs, x.Release(ctx))
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

// renewLoop renews each held lease every TTL/5, retrying failed renewals
// with backoff, and marks lost those it could not renew in time.
func (l *Leases) renewLoop() {
	defer close(l.done)
	tick := time.NewTicker(l.opts.TTL / 40)
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
			if !x.due(time.Now()) {
				continue
			}
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
const renewConcurrency = 64

// due reports whether x needs the renewal loop's attention at now: its
// last renewal is TTL/5 old and no backoff holds it back, or it is past
// its validity.
func (x *Lease) due(now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		return false
	}
	return !now.Before(x.validUntil) ||
		(x.validUntil.Sub(now) <= x.l.validFor()-x.l.renewAfter() && !now.Before(x.nextTry))
}

// renew renews x, and marks it lost if it is past its validity or another
// node holds it. A renewal that fails for another reason (a stream
// between leaders, no answer) is retried on a later tick, after a pause
// growing from 100 ms to 1 s, for as long as the lease is valid.
func (x *Lease) renew() {
	x.mu.Lock()
	rev, until, gone := x.rev, x.validUntil, x.err != nil
	x.mu.Unlock()
	if gone {
		return
	}
	now := time.Now()
	if !now.Before(until) {
		x.lose(x.lapsed(), true)
		return
	}
	kv := x.l.kv
	ctx, cancel := context.WithTimeout(context.Background(), min(until.Sub(now), renewAttempt))
	defer cancel()
	newRev, err := updateSettled(ctx, kv, x.id, x.l.value, rev)
	if isRevisionMismatch(err) {
		// Another node holds it — or this node does, at a revision whose
		// acknowledgement was lost (a renewal sent as the stream's leader
		// died, stored by its successor): renew on the revision stored.
		e, gerr := x.l.readLease(ctx, x.id)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			x.lose(fmt.Errorf("%w: session %q: the lease entry expired or was deleted", ErrLeaseLost, x.id), true)
			return
		case gerr != nil:
			err = gerr
		case !bytes.Equal(e.value, x.l.value):
			var h LeaseHolder
			_ = json.Unmarshal(e.value, &h)
			x.lose(fmt.Errorf("%w: session %q: taken by node %q", ErrLeaseLost, x.id, h.Node), true)
			return
		default:
			now = time.Now()
			newRev, err = updateSettled(ctx, kv, x.id, x.l.value, e.revision)
			if isRevisionMismatch(err) {
				// Changed again since it was read: an earlier renewal of
				// this node's still in flight landed, or another node took
				// it. A renewal like any failed one, tried again while the
				// lease is valid: the next reads which it was.
				err = fmt.Errorf("store: session %q: the lease entry changed again while it was renewed: %w", x.id, err)
			}
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		return
	}
	if err == nil {
		if x.failures > 0 {
			x.l.log.Info("session lease renewed again", slog.String("session", x.id), slog.Int("failed_renewals", x.failures),
				slog.Duration("left", until.Sub(now).Round(time.Millisecond)))
		}
		x.rev, x.validUntil = newRev, now.Add(x.l.validFor())
		x.failures, x.nextTry, x.lastErr = 0, time.Time{}, nil
		return
	}
	if x.failures == 0 {
		x.l.log.Warn("renew session lease: retrying while it is valid", slog.String("session", x.id),
			slog.Duration("valid_for", until.Sub(now).Round(time.Millisecond)), slog.String(logKeyError, err.Error()))
	}
	x.failures++
	x.lastErr = err
	x.nextTry = time.Now().Add(renewBackoff(x.failures))
	x.l.s.kickHealth()
}

// renewBackoff is the pause after the nth failed renewal in a row: 100 ms
// doubling to 1 s, less up to a fifth at random so that a node's renewals
// do not all return at once.
func renewBackoff(n int) time.Duration {
	d := time.Second
	if n < 5 {
		d = 100 * time.Millisecond << (n - 1)
	}
	return d - mrand.N(d/5)
}

// lapsed is the error of a lease not renewed within its validity; when
// the store is at fault it wraps an [*UnavailableError] saying what is
// wrong with it.
func (x *Lease) lapsed() error {
	x.mu.Lock()
	n, last := x.failures, x.lastErr
	x.mu.Unlock()
	base := fmt.Sprintf("session %q: not renewed within %s (%d renewals failed)", x.id, x.l.validFor(), n)
	if h := x.l.s.Health(); h.State != HealthOK {
		return fmt.Errorf("%w: %s: %w", ErrLeaseLost, base, &UnavailableError{Op: "renew the lease", Health: h, Err: last})
	}
	if last != nil {
		return fmt.Errorf("%w: %s: %w", ErrLeaseLost, base, x.l.s.unavailable("renew the lease", last))
	}
	return fmt.Errorf("%w: %s", ErrLeaseLost, base)
}

// inProcess reports an update a replicated stream refused with "wrong
// last sequence" (10164) because another update of the same key was still
// being applied: it compared no revision (publish.go's pubRetryable). The
// marker outlives the other update's acknowledgement by a moment, so an
// update right after one of the same key meets it even without an
// election (TestRenewalReadsTheLeader in a loaded run).
func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// inProcessWait is the first pause before an update told inProcess is
// tried again: the other update is applied within a replication round.
const inProcessWait = 5 * time.Millisecond

// updateSettled is kv.Update, sent again after a short pause while the
// stream answers that another update of the key is being applied
// (inProcess), within ctx.
func updateSettled(ctx context.Context, kv jetstream.KeyValue, key string, value []byte, rev uint64) (uint64, error) {
	for wait := inProcessWait; ; wait = min(2*wait, 100*time.Millisecond) {
		n, err := kv.Update(ctx, key, value, rev)
		if !inProcess(err) || !pause(ctx, wait) {
			return n, err
		}
	}
}

// isRevisionMismatch reports an update refused because the entry's
// revision is not the one given.
func isRevisionMismatch(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
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
// A cluster between leaders is ridden out within ctx.
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
	err := x.l.s.retry(rctx, fmt.Sprintf("release the lease of session %q", x.id), func(ctx context.Context) error {
		for {
			err := x.l.kv.Delete(ctx, x.id, jetstream.LastRevision(rev))
			if !isRevisionMismatch(err) {
				return err
			}
			// The entry is at another revision: taken since, deleted by an
			// earlier attempt whose answer was lost — or renewed by this
			// node after rev was read (a renewal in flight as the release
			// began lands, and its new revision is never recorded). Only
			// the last is still this node's to delete; left alone, it
			// would make the next owner wait out the TTL.
			e, gerr := x.l.readLease(ctx, x.id)
			if errors.Is(gerr, jetstream.ErrKeyNotFound) {
				return nil
			}
			if gerr != nil {
				return gerr
			}
			if !bytes.Equal(e.value, x.l.value) || e.revision == rev {
				return nil
			}
			rev = e.revision
		}
	})
	if err != nil {
		return fmt.Errorf("store: session %q: release lease: %w", x.id, err)
	}
	return nil
}
