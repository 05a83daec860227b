package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HealthState is what a store knows of the NATS servers it uses.
type HealthState string

// Health states.
const (
	// HealthOK: JetStream answers (the last probe's write was stored).
	HealthOK HealthState = "ok"
	// HealthStalled: JetStream does not answer, but a quorum of the known
	// servers is reachable — a leader election, or servers that cannot
	// reach each other. Requests ride it out (see [Options.Timeout]).
	HealthStalled HealthState = "stalled"
	// HealthNoQuorum: fewer than a quorum of the known servers are
	// reachable. Requests fail at once with an [*UnavailableError].
	HealthNoQuorum HealthState = "no_quorum"
	// HealthUnreachable: none of the known servers is reachable. Requests
	// fail at once with an [*UnavailableError].
	HealthUnreachable HealthState = "unreachable"
	// HealthWriteFailed: the embedded server could not write to its disk
	// (a full disk, an I/O error) and, as nats-server's file store does
	// after its first write error, stores nothing more until it restarts.
	// Requests fail at once with an [*UnavailableError] saying so.
	HealthWriteFailed HealthState = "write_failed"
	// HealthClosed: the store is closed.
	HealthClosed HealthState = "closed"
)

// failsAtOnce reports the states in which requests fail at once rather
// than wait.
func failsAtOnce(st HealthState) bool {
	return st == HealthNoQuorum || st == HealthUnreachable || st == HealthWriteFailed
}

// Health is a store's view of its NATS servers ([Store.Health]).
type Health struct {
	State HealthState
	// Ready is false when the store cannot serve: unreachable, without a
	// quorum, closed, or stalled for longer than an election lasts
	// (stallGrace).
	Ready bool
	// Message says what is wrong, naming the store, in words a client is
	// shown ("the session store has no quorum: 1 of 3 NATS servers
	// reachable"); empty when the state is ok.
	Message string
	// Reachable and Servers count the NATS servers that answered the last
	// probe and those the connection knows of (configured and
	// discovered); both 0 for the embedded server.
	Reachable, Servers int
	// Since is when the state began.
	Since time.Time
}

// ErrUnavailable reports a store that cannot serve a request: its NATS
// servers are unreachable, have no quorum, or did not answer within the
// request's bound. The error is an [*UnavailableError].
var ErrUnavailable = errors.New("store: the session store is unavailable")

// UnavailableError reports a request the store could not serve because of
// the store itself, with what it knew of its servers at the time. It
// matches [ErrUnavailable] with errors.Is and unwraps to the NATS error,
// if there was one.
type UnavailableError struct {
	Op     string // what was asked, like "acquire the lease of session \"s1\""
	Health Health
	Err    error // the last NATS error; nil when the request was refused at once
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("store: %s: %s", e.Op, e.Health.Message)
	}
	return fmt.Sprintf("store: %s: %s (%v)", e.Op, e.Health.Message, e.Err)
}

// Is reports target == ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

// StoreUnavailable returns the sentence a client is shown: what is wrong
// with the store, without server addresses (package server reads it).
func (e *UnavailableError) StoreUnavailable() string { return e.Health.Message }

const (
	// probeEvery is how often a clustered store probes its servers.
	probeEvery = 500 * time.Millisecond
	// probeWrite bounds a probe's requests: an R3 write takes
	// milliseconds, and a stall (not a failure) is all a slower one causes.
	probeWrite = 800 * time.Millisecond
	// probeTimeout bounds each server's dial and greeting.
	probeTimeout = time.Second
	// stallGrace is how long a stalled store stays ready: a JetStream
	// leader election takes 4 to 9 s after the leader's last heartbeat
	// (nats-server's raft election timeout), and requests ride it out; a
	// stall longer than this is not an election.
	stallGrace = 15 * time.Second
	// probeKey is the key the probe writes in the owners bucket: it names
	// no session (session ids have no dots) and SessionOwners skips it.
	probeKey = "brain.probe"
)

// health is a store's monitor state.
type health struct {
	mu   sync.Mutex
	cur  Health
	bad  chan struct{} // closed while the state fails requests at once; replaced when it recovers
	kick chan struct{} // asks the monitor to probe now
	stop chan struct{}
	done chan struct{}
}

func newHealth() *health {
	return &health{cur: Health{State: HealthOK, Ready: true, Since: time.Now()}, bad: make(chan struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Health returns what the store knows of its servers. The embedded server
// is always ok until the store closes; a store on an external server
// probes it every 500 ms (a write to the owners bucket and, when that
// fails, a connection to every known server), so the state is at most a
// probe old.
func (s *Store) Health() Health {
	if s.closed.Load() {
		return Health{State: HealthClosed, Message: "the session store is closed", Since: time.Now()}
	}
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	h := s.health.cur
	if h.State == HealthStalled && time.Since(h.Since) > stallGrace {
		h.Ready = false
	}
	return h
}

// failing returns the health when it fails requests at once (unreachable,
// no quorum), or nil.
func (s *Store) failing() *Health {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if h := s.health.cur; failsAtOnce(h.State) {
		return &h
	}
	return nil
}

// badChan is closed once the health fails requests at once.
func (s *Store) badChan() <-chan struct{} {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.bad
}

// kickHealth asks the monitor to probe now: a request just failed.
func (s *Store) kickHealth() {
	select {
	case s.health.kick <- struct{}{}:
	default:
	}
}

// unavailable wraps err, a request's failure, with the store's health.
func (s *Store) unavailable(op string, err error) error {
	h := s.Health()
	if h.State == HealthOK {
		// The probe has not seen it (yet): say what the request saw.
		switch {
		case s.nc != nil && !s.nc.IsConnected():
			h.Message = "the session store cannot be reached: the connection to NATS is down (reconnecting)"
		case errors.Is(err, nats.ErrNoResponders) || isNoStreamResponse(err):
			h.Message = "the session store did not answer: a stream has no leader"
		default:
			h.Message = "the session store did not answer in time"
		}
	}
	return &UnavailableError{Op: op, Health: h, Err: err}
}

// monitor probes the servers until the store closes.
func (s *Store) monitor() {
	defer close(s.health.done)
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		s.probe()
		select {
		case <-s.health.stop:
			return
		case <-t.C:
		case <-s.health.kick:
		}
	}
}

// probe writes the probe key and, at the same time, counts the servers
// that greet a connection; the count decides the state only when the
// write fails (a known server may be one this node cannot reach while
// the cluster is well).
func (s *Store) probe() {
	servers := s.nc.Servers()
	counted := make(chan int, 1)
	go func() { counted <- countReachable(servers) }()
	ctx, cancel := context.WithTimeout(context.Background(), probeWrite)
	err := s.probeJetStream(ctx)
	cancel()
	reachable := <-counted
	if err == nil {
		s.setHealth(Health{State: HealthOK, Ready: true, Reachable: reachable, Servers: len(servers)}, nil)
		return
	}
	n := len(servers)
	h := Health{Reachable: reachable, Servers: n}
	switch {
	case n > 0 && reachable == 0:
		h.State = HealthUnreachable
		h.Message = fmt.Sprintf("the session store cannot be reached: none of %d NATS servers answers", n)
	case reachable < n/2+1:
		h.State = HealthNoQuorum
		h.Message = fmt.Sprintf("the session store has no quorum: %d of %d NATS servers reachable", reachable, n)
	default:
		h.State, h.Ready = HealthStalled, true
		what := "JetStream does not answer"
		if errors.Is(err, nats.ErrNoResponders) || isNoStreamResponse(err) {
			what = "a stream has no leader"
		}
		if !s.nc.IsConnected() {
			what += ", the connection to NATS is down"
		}
		// A leader election, or servers that cannot reach each other.
		h.Message = fmt.Sprintf("the session store does not answer: %s (%d of %d NATS servers reachable)", what, reachable, n)
	}
	s.setHealth(h, err)
}

// probeJetStream asks what opening a session needs: a write to a
// replicated bucket (its leader has a quorum), the events stream's leader
// (a journal reads the session's last event from it) and the meta leader
// (a load creates a consumer through it) — all at once.
func (s *Store) probeJetStream(ctx context.Context) error {
	errs := make(chan error, 3)
	go func() {
		_, err := s.owners.PutString(ctx, probeKey, "probe")
		errs <- err
	}()
	go func() {
		info, err := s.stream.Info(ctx)
		if err == nil && info.Cluster != nil && info.Cluster.Leader == "" && s.opts.Replicas > 1 {
			err = fmt.Errorf("stream %s: %w", streamName, jetstream.ErrNoStreamResponse)
		}
		errs <- err
	}()
	go func() {
		_, err := s.js.AccountInfo(ctx)
		errs <- err
	}()
	var first error
	for range 3 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// setHealth records h, logging changes of state.
func (s *Store) setHealth(h Health, cause error) {
	s.health.mu.Lock()
	old := s.health.cur
	if old.State == h.State {
		h.Since = old.Since
	} else {
		h.Since = time.Now()
	}
	s.health.cur = h
	failing, wasFailing := failsAtOnce(h.State), failsAtOnce(old.State)
	switch {
	case failing && !wasFailing:
		close(s.health.bad)
	case !failing && wasFailing:
		s.health.bad = make(chan struct{})
	}
	s.health.mu.Unlock()
	if old.State == h.State {
		return
	}
	attrs := []any{slog.String("state", string(h.State)), slog.String("was", string(old.State)),
		slog.Duration("after", time.Since(old.Since).Round(time.Millisecond))}
	if h.Servers > 0 { // the embedded server is no count of servers
		attrs = append(attrs, slog.Int("reachable", h.Reachable), slog.Int("servers", h.Servers))
	}
	if cause != nil {
		attrs = append(attrs, slog.String(logKeyError, cause.Error()))
	}
	if h.State == HealthOK {
		s.log.Info("session store: answering again", attrs...)
	} else {
		s.log.Warn("session store: "+h.Message, attrs...)
	}
}

// countReachable counts the servers that accept a connection and greet it
// with their INFO line within probeTimeout, all at once.
func countReachable(servers []string) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, u := range servers {
		wg.Go(func() {
			if reachable(u) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

// reachable reports whether the NATS server at u greets a connection.
func reachable(u string) bool {
	host := u
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		host = p.Host
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "4222")
	}
	c, err := net.DialTimeout("tcp", host, probeTimeout)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(probeTimeout))
	line, err := bufio.NewReaderSize(c, 4096).ReadSlice('\n')
	return (err == nil || errors.Is(err, bufio.ErrBufferFull)) && strings.HasPrefix(string(line), "INFO ")
}
