package server

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brainrt/brain/internal/workers"
	"github.com/brainrt/brain/session"
)

// Store persists sessions; package store implements it on JetStream.
type Store interface {
	Journal(id string) (session.Journal, error)
	Load(ctx context.Context, id string) ([]session.Event, error)
}

// Resumer is a [Store] that loads a session and makes the journal that
// continues it in one (package store's Store does): the Manager opens a
// stored session with Resume when its store has it, instead of Journal
// and then Load.
type Resumer interface {
	Resume(ctx context.Context, id string) ([]session.Event, session.Journal, error)
}

// ManagerOptions configure a [Manager].
type ManagerOptions struct {
	// Store, if set, journals every session and restores it after a
	// restart or hibernation. Without it sessions live in memory only.
	Store Store
	// Attach registers the runtime's agent-side capabilities in a session
	// that was created or restored (an environment's Expose); Release undoes
	// it when the session hibernates.
	Attach  func(*session.Session) error
	Release func(*session.Session)
	// Session is the template of every session's options; Journal is set
	// per session from Store.
	Session session.Options
	// Logger receives the manager's logs; nil discards.
	Logger *slog.Logger
	// Limits are the quotas of sessions, connections and journals (see
	// [Limits]); the zero value means the defaults.
	Limits Limits
	// Lease, if set, makes this manager one node of a cluster
	// (docs/cluster.md): a session is opened only under its lease, which
	// is released when the session hibernates or is deleted, and the
	// session stops being served the moment the lease is lost. A session
	// leased by another node is a [*NotOwnerError]; the server forwards.
	Lease LeaseFunc
	// Node is this node's id in a cluster, sent with forwarded requests.
	Node string
	// Holder, if set, names a session's lease holder without taking the
	// lease: a forwarded request the owner dropped unanswered is sent
	// again when the owner released the lease meanwhile, as a stopping
	// node does (cluster_retry.go).
	Holder HolderFunc
	// LeaseTTL is the cluster's lease TTL, for Holder: a dropped request
	// waits for the owner's release for less than a lease that its dead
	// holder renewed last can take to lapse (cluster_retry.go).
	LeaseTTL time.Duration
}

// Manager owns the sessions of a kernel: it creates a session on first use,
// restores it from the store when it has a past, and hibernates it — drops
// it from memory — when it has been idle.
type Manager struct {
	opts ManagerOptions
	log  *slog.Logger

	mu   sync.Mutex
	live map[string]*managed
	// stopping: Stop or Close was called: no session is opened, and a
	// WebSocket starts no new work (shutdown.go, admitFrame). Set with mu
	// held; read with it where the read must be ordered with live, without
	// it on every frame.
	stopping atomic.Bool
	// journalFault is the latest journal append the store refused on a
	// node of its own (storefault.go, handleReady).
	journalFault atomic.Pointer[journalFault]
	requests     int // requests a stop waits for: MCP POSTs being answered (cluster_drain.go)

	inbox inbox // pending approvals across sessions, for the console

	limits   Limits     // quotas, with defaults (limits.go)
	owners   *owners    // who owns each session, and the quota of sessions per tenant (tenancy.go)
	journals journals   // journal bytes per session
	cursors  cursorSeal // seals the sessions list's cursors of clients (list_cursor.go)
	// runners run every session's started calls and handlers
	// (session.Options.Go: runOn, its Submit made once) on goroutines
	// shared by all of them.
	runners *workers.Pool[func()]
	runOn   func(f func())
	// checkpoints writes hibernated sessions' checkpoints, with a
	// Checkpointer store (checkpoints.go); nil without one.
	checkpoints *checkpoints
}

// runnerIdle is how long a shared runner goroutine waits for its next job
// before it exits.
const runnerIdle = 10 * time.Second

func runJob(f func()) { f() }

type managed struct {
	id       string
	s        *session.Session
	users    int // connections and requests holding it
	lastUsed time.Time
	ready    chan struct{} // closed when s (or err) is set
	err      error

	conns    map[*conn]struct{} // WebSocket connections; guarded by Manager.mu
	activity atomic.Int64       // unix nanoseconds of the last call event or use
	calls    callTimes          // the kernel's timings of recent calls
	lease    Lease              // in a cluster: this node's hold on it (cluster.go); set before ready
}

// conn is one WebSocket connection to a managed session.
type conn struct {
	side      session.PeerSide
	cancel    context.CancelCauseFunc
	delivered *atomic.Uint64 // the last seq its writer has read of the session's log (ws.go)
}

// NewManager returns a manager.
func NewManager(opts ManagerOptions) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := opts.Limits.withDefaults()
	runners := workers.New(runJob, runnerIdle)
	m := &Manager{opts: opts, log: opts.Logger, live: map[string]*managed{}, inbox: newInbox(),
		limits: l, owners: newOwners(l.SessionsPerToken, opts.Store, opts.Logger), journals: journals{limit: l.JournalBytesPerSession},
		runners: runners, runOn: runners.Submit}
	if c, ok := opts.Store.(Checkpointer); ok && c.KeepsCheckpoints() {
		template := opts.Session
		m.checkpoints = newCheckpoints(func(ctx context.Context, id string) error {
			return c.Checkpoint(ctx, id, &template)
		}, opts.Logger)
	}
	return m
}

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ValidSessionID reports whether id may name a session: 1 to 128 of
// A-Z a-z 0-9 _ -.
func ValidSessionID(id string) bool { return sessionIDPattern.MatchString(id) }

// Acquire returns the session id — live, restored from the store, or new —
// and a release function to call when the caller is done with it. A
// session is never hibernated while held.
func (m *Manager) Acquire(ctx context.Context, id string) (*session.Session, func(), error) {
	s, release, _, err := m.acquire(ctx, id, true)
	return s, release, err
}

// acquireCreated is Acquire, reporting whether this call created the
// session (it had no past).
func (m *Manager) acquireCreated(ctx context.Context, id string) (*session.Session, func(), bool, error) {
	return m.acquire(ctx, id, true)
}

// Lookup is [Manager.Acquire] for a session that exists — live, or stored
// (it is restored) — and never creates one: a session that does not exist
// is [ErrNotFound].
func (m *Manager) Lookup(ctx context.Context, id string) (*session.Session, func(), error) {
	s, release, _, err := m.acquire(ctx, id, false)
	return s, release, err
}

// acquire returns the session id and a release function; created reports
// whether this call created it.
func (m *Manager) acquire(ctx context.Context, id string, create bool) (s *session.Session, release func(), created bool, err error) {
	if !ValidSessionID(id) {
		return nil, nil, false, fmt.Errorf("invalid session id %q: use 1 to 128 of A-Z a-z 0-9 _ -", id)
	}
	m.mu.Lock()
	if m.stopping.Load() {
		m.mu.Unlock()
		return nil, nil, false, ErrStopping
	}
	e, ok := m.live[id]
	if !ok {
		e = &managed{id: id, ready: make(chan struct{}), conns: map[*conn]struct{}{}}
		m.live[id] = e
	}
	e.users++
	m.mu.Unlock()
	e.touch()
	if !ok {
		e.s, created, e.err = m.open(ctx, e, create)
		if e.err != nil {
			m.dropLease(e)
		} else {
			m.watchLease(e) // cluster.go
		}
		close(e.ready)
		if e.err != nil {
			m.mu.Lock()
			delete(m.live, id)
			m.mu.Unlock()
		}
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		m.release(e)
		return nil, nil, false, ctx.Err()
	}
	if e.err != nil {
		return nil, nil, false, e.err
	}
	if err := m.moving(e); err != nil { // cluster.go
		m.release(e)
		return nil, nil, false, err
	}
	var once sync.Once
	return e.s, func() { once.Do(func() { m.release(e) }) }, created, nil
}

func (m *Manager) release(e *managed) {
	m.mu.Lock()
	e.users--
	e.lastUsed = time.Now()
	m.mu.Unlock()
	e.touch()
}

func (e *managed) touch() { e.activity.Store(time.Now().UnixNano()) }

// open creates or restores a session; with create false, a session that
// has no past is ErrNotFound. created reports a new session.
func (m *Manager) open(ctx context.Context, e *managed, create bool) (s *session.Session, created bool, err error) {
	id := e.id
	opts := m.opts.Session
	if opts.Go == nil {
		opts.Go = m.runOn
	}
	next := opts.Observe
	opts.Observe = func(ev session.CallEvent) {
		e.activity.Store(ev.Time.UnixNano())
		e.calls.observe(ev)
		m.inbox.observe(ev)
		if next != nil {
			next(ev)
		}
	}
	if !create && m.opts.Store == nil {
		return nil, false, ErrNotFound
	}
	if sz, ok := m.opts.Store.(interface{ MaxEventBytes() int }); ok && m.opts.Store != nil && opts.MaxEventBytes == 0 {
		opts.MaxEventBytes = sz.MaxEventBytes() // no event is shown that the store could not hold
	}
	var events []session.Event
	var cp *session.Checkpoint // the events up to a point, in short (Checkpointer)
	var cj *countingJournal    // counts journal bytes (limits.go)
	if m.opts.Store != nil {
		if err := m.takeLease(ctx, e); err != nil { // cluster.go; before the journal reads the last event
			return nil, false, err
		}
		var j session.Journal
		if r, ok := m.opts.Store.(Checkpointer); ok {
			if cp, events, j, err = r.ResumeFrom(ctx, id); err != nil {
				return nil, false, fmt.Errorf("session %s: load: %w", id, err)
			}
		} else if r, ok := m.opts.Store.(Resumer); ok {
			if events, j, err = r.Resume(ctx, id); err != nil {
				return nil, false, fmt.Errorf("session %s: load: %w", id, err)
			}
		} else {
			if j, err = m.opts.Store.Journal(id); err != nil {
				return nil, false, fmt.Errorf("session %s: journal: %w", id, err)
			}
			if events, err = m.opts.Store.Load(ctx, id); err != nil {
				return nil, false, fmt.Errorf("session %s: load: %w", id, err)
			}
		}
		cj = newCountingJournal(m.fence(e, j))
		if e.lease == nil {
			cj.onFail = func(err error) {
				m.journalFault.Store(&journalFault{err: err, at: time.Now()})
				<-e.ready // failed while opening: the open's error says so
				if e.err == nil {
					m.leave(e, err, reloadCause(err), "session journal append failed: no longer serving it; its next connection loads it again from its journal")
				}
			}
		}
		opts.Journal = cj
		if r, ok := j.(session.EventReader); ok {
			opts.History = r // the session keeps its latest events in memory, and reads the older back
		}
		last := uint64(0)
		if cp != nil {
			cj.bytes.Add(cp.Bytes)
			last = cp.Seq
		}
		for _, ev := range events {
			cj.bytes.Add(eventBytes(ev))
			last = ev.Seq
		}
		restoredUpTo(cj.j, last) // cluster.go
	}
	if cp != nil || len(events) > 0 {
		s, err := session.RestoreFrom(id, cp, events, &opts, m.opts.Attach)
		if err != nil {
			return nil, false, err
		}
		if cj != nil {
			m.journals.track(s, cj)
		}
		if cp != nil {
			m.log.Info("session restored", slog.String("session", id), slog.Uint64("checkpoint", cp.Seq), slog.Int("events_after", len(events)))
		} else {
			m.log.Info("session restored", slog.String("session", id), slog.Int("events", len(events)))
		}
		return s, false, nil
	}
	if !create {
		return nil, false, ErrNotFound
	}
	if err := m.owners.reserve(ctx, ownerOf(ctx), id, accessOf(ctx) == accessCreate); err != nil {
		return nil, false, err
	}
	s = session.New(id, &opts)
	if cj != nil {
		m.journals.track(s, cj)
	}
	if m.opts.Attach != nil {
		if err := m.opts.Attach(s); err != nil {
			m.journals.untrack(s)
			m.owners.forget(id)
			return nil, false, fmt.Errorf("session %s: attach: %w", id, err)
		}
	}
	return s, true, nil
}

// Live returns the number of sessions in memory.
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// Hibernate drops from memory every session that nobody holds, that has no
// pending call, and that was last used more than idle ago. It needs a
// store: without one a hibernated session would be lost, so nothing is
// dropped. It returns how many sessions it dropped.
func (m *Manager) Hibernate(idle time.Duration) int {
	if m.opts.Store == nil {
		return 0
	}
	cutoff := time.Now().Add(-idle)
	m.mu.Lock()
	var drop []*managed
	for id, e := range m.live {
		select {
		case <-e.ready:
		default:
			continue
		}
		if e.users == 0 && !e.lastUsed.After(cutoff) && e.s.PendingCalls() == 0 {
			delete(m.live, id)
			drop = append(drop, e)
		}
	}
	m.mu.Unlock()
	for _, e := range drop {
		m.dropLease(e) // cluster.go: a hibernated session wakes on whichever node a connection reaches
		m.journals.untrack(e.s)
		if m.opts.Release != nil {
			m.opts.Release(e.s)
		}
		m.log.Debug("session hibernated", slog.String("session", e.s.ID()))
		if m.checkpoints != nil {
			m.checkpoints.add(e.id) // checkpoints.go: its next wake reads a few events, not all
		}
	}
	return len(drop)
}
