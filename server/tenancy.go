package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/brainrt/brain/session"
)

// Tenancy (docs/serve.md, "Tenants"): a session belongs to the tenant of
// the token that created it, recorded as the session's owner key; every
// other client, app, environment or model token is told the session does
// not exist. Operators reach every session. A deleted session's record
// becomes a tombstone, so that nothing but an explicit create makes a new
// session of its id.

// deletedOwner is the owner record of a deleted session. Owner keys are
// hex digits or "tenant:…", so it names no owner.
const deletedOwner = "!deleted"

// ErrDeleted is returned for a session that was deleted, by every path
// that would create it but an explicit create ([Manager.Create]).
var ErrDeleted = errors.New("the session was deleted")

// ErrExists is returned by [Manager.Create] for an id that is taken.
var ErrExists = errors.New("a session with this id exists")

type ownerCtxKey struct{}

// withOwner tells Manager.Acquire which owner a new session is recorded
// under.
func withOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerCtxKey{}, owner)
}

func ownerOf(ctx context.Context) string {
	o, _ := ctx.Value(ownerCtxKey{}).(string)
	return o
}

// owners records who owns each session and counts the sessions of each
// owner for the quota. With a store that records owners (package store
// does), both survive restarts and are shared by a cluster's nodes: the
// record of a session this node has not seen is read from the store, and
// an owner's count is read from the store's count of it the first time
// the owner creates a session (one read: never every session's record).
type owners struct {
	limit int
	rec   ownerRecorder // nil: owners live in memory only
	log   *slog.Logger

	mu     sync.Mutex
	owner  map[string]string // session id → owner key (or deletedOwner), as far as known
	counts map[string]int    // owner key → sessions, for the owners whose count was read
}

// ownerRecorder is what a [Store] may offer to keep owners across
// restarts and nodes (package store has it).
type ownerRecorder interface {
	SetSessionOwner(ctx context.Context, id, owner string) error
	SessionOwner(ctx context.Context, id string) (string, bool, error)
	// SessionsOwned counts the sessions recorded under owner (an owner
	// starting with "!", like deletedOwner, is not counted).
	SessionsOwned(ctx context.Context, owner string) (int, error)
}

func newOwners(limit int, st Store, log *slog.Logger) *owners {
	q := &owners{limit: limit, log: log, owner: map[string]string{}, counts: map[string]int{}}
	if rec, ok := st.(ownerRecorder); ok && st != nil {
		q.rec = rec
	}
	return q
}

// of returns the owner key recorded for session id (deletedOwner for a
// deleted one), with ok false when none is.
func (q *owners) of(ctx context.Context, id string) (owner string, ok bool, err error) {
	q.mu.Lock()
	owner, ok = q.owner[id]
	q.mu.Unlock()
	if ok || q.rec == nil {
		return owner, ok, nil
	}
	owner, ok, err = q.rec.SessionOwner(ctx, id)
	if err != nil || !ok {
		return "", false, err
	}
	q.mu.Lock()
	if _, known := q.owner[id]; !known {
		q.owner[id] = owner // counted already, if its owner's count was read
	}
	q.mu.Unlock()
	return owner, true, nil
}

// set records owner for id; q.mu is held. The counts read move with it.
func (q *owners) set(id, owner string) {
	if old, ok := q.owner[id]; ok && old != deletedOwner {
		if _, read := q.counts[old]; read {
			q.counts[old] = max(0, q.counts[old]-1)
		}
	}
	q.owner[id] = owner
	if _, read := q.counts[owner]; read && owner != deletedOwner {
		q.counts[owner]++
	}
}

// count makes owner's count known, reading it from the store the first
// time; q.mu is held (the read is one key).
func (q *owners) count(ctx context.Context, owner string) error {
	if _, read := q.counts[owner]; read {
		return nil
	}
	n := 0
	if q.rec != nil {
		var err error
		if n, err = q.rec.SessionsOwned(ctx, owner); err != nil {
			return err
		}
	}
	q.counts[owner] = n
	return nil
}

// reserve records owner as the owner of the new session id, unless the
// owner's quota is used up; an empty owner (a caller inside the process)
// records nothing and is not limited. A tombstone is replaced only when
// explicit is set (an explicit create).
func (q *owners) reserve(ctx context.Context, owner, id string, explicit bool) error {
	if owner == "" {
		return nil
	}
	if _, _, err := q.of(ctx, id); err != nil { // its record, if the store has one
		return err
	}
	q.mu.Lock()
	if q.limit >= 0 {
		if err := q.count(ctx, owner); err != nil {
			q.mu.Unlock()
			return fmt.Errorf("count the sessions of this token: %w", err)
		}
	}
	if o, ok := q.owner[id]; ok && (o != deletedOwner || !explicit) {
		q.mu.Unlock()
		if o == deletedOwner {
			return ErrDeleted
		}
		return nil
	}
	if q.limit >= 0 && q.counts[owner] >= q.limit {
		n := q.counts[owner] // more than the limit when it was lowered, or sessions predate it
		q.mu.Unlock()
		return quotaError("this token's tenant has %d sessions, and its limit is %d (limits.sessions_per_token, counted for all the tenant's tokens together); delete one of them (DELETE /v1/sessions/{id}) or raise the limit", n, q.limit)
	}
	old, hadOld := q.owner[id]
	q.set(id, owner)
	q.mu.Unlock()
	if q.rec != nil {
		if err := q.rec.SetSessionOwner(ctx, id, owner); err != nil {
			q.mu.Lock()
			if hadOld {
				q.set(id, old)
			} else {
				q.drop(id)
			}
			q.mu.Unlock()
			return err
		}
	}
	return nil
}

// drop forgets id's record; q.mu is held.
func (q *owners) drop(id string) {
	if o, ok := q.owner[id]; ok {
		delete(q.owner, id)
		if _, read := q.counts[o]; read && o != deletedOwner {
			q.counts[o] = max(0, q.counts[o]-1)
		}
	}
}

// forget releases session id, as if it had never been created: for a
// session whose creation failed.
func (q *owners) forget(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drop(id)
}

// deleted records session id as deleted: its quota is given back, and no
// path but an explicit create makes it again.
func (q *owners) deleted(ctx context.Context, id string) error {
	if _, _, err := q.of(ctx, id); err != nil { // its owner, whose count goes down
		return err
	}
	q.mu.Lock()
	q.set(id, deletedOwner)
	q.mu.Unlock()
	if q.rec != nil {
		return q.rec.SetSessionOwner(ctx, id, deletedOwner)
	}
	return nil
}

// access is how a request reaches a session.
type access int

const (
	accessRead   access = iota // an existing session only
	accessJoin                 // create it if it never existed (a WebSocket or MCP connection)
	accessCreate               // create it, even over a tombstone; an existing one is ErrExists
)

// AcquireAs is [Manager.Acquire] (with access join: a session that never
// existed is created, recorded under pr's tenant) or [Manager.Lookup]
// (read) for principal pr: a session pr's tenant does not own is
// [ErrNotFound], as if it did not exist, and so is a deleted one for a
// join ([ErrDeleted]). Operators reach every session and never create one.
func (m *Manager) AcquireAs(ctx context.Context, pr Principal, id string, create bool) (*session.Session, func(), error) {
	a := accessRead
	if create && !pr.Operator() {
		a = accessJoin
	}
	return m.acquireAs(ctx, pr, id, a)
}

func (m *Manager) acquireAs(ctx context.Context, pr Principal, id string, a access) (*session.Session, func(), error) {
	if !ValidSessionID(id) {
		return nil, nil, fmt.Errorf("invalid session id %q: use 1 to 128 of A-Z a-z 0-9 _ -", id)
	}
	owner, recorded, err := m.owners.of(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case recorded && owner == deletedOwner && a != accessCreate:
		if a == accessJoin {
			return nil, nil, ErrDeleted
		}
		return nil, nil, ErrNotFound
	case recorded && owner != deletedOwner && !pr.reaches(owner):
		if a == accessCreate {
			return nil, nil, ErrExists
		}
		return nil, nil, ErrNotFound
	case recorded && owner != deletedOwner && a == accessCreate:
		return nil, nil, ErrExists
	case !recorded && a == accessRead && !pr.Operator():
		// Nothing recorded: it never existed, or it predates owner records
		// (reached by operators only).
		return nil, nil, ErrNotFound
	}
	ctx = withOwner(ctx, pr.owner())
	ctx = withAccess(ctx, a)
	var s *session.Session
	var release func()
	var created bool
	if a == accessRead {
		s, release, err = m.Lookup(ctx, id)
	} else {
		s, release, created, err = m.acquireCreated(ctx, id)
	}
	if err != nil {
		return nil, nil, err
	}
	if a == accessCreate && !created {
		release()
		return nil, nil, ErrExists
	}
	if !pr.Operator() { // a race with another tenant's create, or a session with no record
		owner, recorded, err := m.owners.of(ctx, id)
		if err != nil || !recorded || !pr.reaches(owner) {
			release()
			if err != nil {
				return nil, nil, err
			}
			return nil, nil, ErrNotFound
		}
	}
	return s, release, nil
}

// Create makes a new session for principal pr, recorded under its tenant
// (an operator's session is reached by operators only): an id that is
// taken is [ErrExists]; a deleted session's id may be created again.
func (m *Manager) Create(ctx context.Context, pr Principal, id string) (*session.Session, func(), error) {
	return m.acquireAs(ctx, pr, id, accessCreate)
}

type accessCtxKey struct{}

func withAccess(ctx context.Context, a access) context.Context {
	return context.WithValue(ctx, accessCtxKey{}, a)
}

func accessOf(ctx context.Context) access {
	a, ok := ctx.Value(accessCtxKey{}).(access)
	if !ok {
		return accessJoin
	}
	return a
}

// operatorsOwner is the owner key of sessions an operator created: no
// token's tenant, so only operators reach them.
const operatorsOwner = "operators"

// owner is the key new sessions of p are recorded under: its tenant's,
// or operatorsOwner; "" for a caller inside the process (nothing is
// recorded: only operators reach what it creates).
func (p Principal) owner() string {
	if p.Operator() {
		return operatorsOwner
	}
	if len(p.owners) == 0 {
		return ""
	}
	return p.owners[0]
}
