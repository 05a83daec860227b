package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// The owners bucket also counts each owner's sessions, so that a quota
// (server's sessions_per_token) reads one key instead of every session's
// record: a million stored sessions would make the first creation after
// a start read a million records, and keep them in memory.
//
// A count is a key of its own, countPrefix and a digest of the owner (an
// owner is opaque, and may hold characters a key may not), holding the
// count in decimal; SetSessionOwner and Delete move it with
// compare-and-set. The record and the count are two writes: a process
// killed between them leaves the count off by one.
//
// A bucket made before counts has none: countsKey marks one that has
// them all, and a bucket without it is counted once, in full, the first
// time a count is asked for.
const (
	countPrefix = "brain.count."
	countsKey   = "brain.counts"
	// maxCountTries bounds the compare-and-set of one count against
	// concurrent writers (other nodes creating sessions of the same owner).
	maxCountTries = 100
)

// countStripes is the number of locks a store's count updates are
// spread over (Store.countLocks): the updates of one owner always take
// the same one.
const countStripes = 64

// countStripe returns which of a store's count locks key takes.
func countStripe(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % countStripes)
}

// countKey is the key of owner's count.
func countKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return countPrefix + hex.EncodeToString(h[:12])
}

// counted reports whether owner's sessions are counted.
func counted(owner string) bool { return !strings.HasPrefix(owner, "!") }

// internalKey reports whether key is the store's own, no session's.
func internalKey(key string) bool { return strings.HasPrefix(key, "brain.") }

// countOwned adds delta to owner's count (never below zero).
func (s *Store) countOwned(ctx context.Context, owner string, delta int) error {
	if !counted(owner) {
		return nil
	}
	key := countKey(owner)
	// This process's updates of one count take turns: a tenant creating
	// sessions many at a time would otherwise lose the compare-and-set
	// to itself, over and over (1 in 10,000 of a scale test's sessions
	// failed, after 100 tries). The loop below is for other nodes.
	mu := &s.countLocks[countStripe(key)]
	mu.Lock()
	defer mu.Unlock()
	for range maxCountTries {
		var e kvEntry
		err := s.retry(ctx, "read a count of sessions", func(ctx context.Context) error {
			var err error
			e, err = s.leaderGet(ctx, s.owners, key)
			return err
		})
		n, found := 0, err == nil
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("store: count the sessions of an owner: %w", err)
		default:
			if n, err = strconv.Atoi(string(e.value)); err != nil {
				return fmt.Errorf("store: the count of sessions at %s is %q: %w", key, e.value, err)
			}
		}
		val := []byte(strconv.Itoa(max(0, n+delta)))
		if !found {
			_, err = s.owners.Create(ctx, key, val)
		} else {
			_, err = s.owners.Update(ctx, key, val, e.revision)
		}
		switch {
		case err == nil:
			return nil
		case inProcess(err):
			// Another writer's update is being applied: read it again once
			// it is (lease.go's inProcess), not at once.
			if !pause(ctx, 2*inProcessWait) {
				return fmt.Errorf("store: count the sessions of an owner: %w", ctx.Err())
			}
			continue
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			s.countsLost.Add(1)
			continue // another writer moved it first: read it again
		default:
			return fmt.Errorf("store: count the sessions of an owner: %w", err)
		}
	}
	return fmt.Errorf("store: count the sessions of an owner: %d tries lost to concurrent writers", maxCountTries)
}

// SessionsOwned returns how many sessions are recorded under owner
// ([Store.SetSessionOwner]): one read, of its count — unless the bucket
// predates counts, which are then made once from every record.
func (s *Store) SessionsOwned(ctx context.Context, owner string) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if err := s.ensureCounts(ctx); err != nil {
		return 0, err
	}
	var e kvEntry
	err := s.retry(ctx, "read a count of sessions", func(ctx context.Context) error {
		var err error
		e, err = s.leaderGet(ctx, s.owners, countKey(owner))
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: count the sessions of an owner: %w", err)
	}
	n, err := strconv.Atoi(string(e.value))
	if err != nil {
		return 0, fmt.Errorf("store: the count of sessions at %s is %q: %w", countKey(owner), e.value, err)
	}
	return n, nil
}

// ensureCounts makes the counts of a bucket made before them, once.
func (s *Store) ensureCounts(ctx context.Context) error {
	if s.countsReady.Load() {
		return nil
	}
	s.countsMu.Lock()
	defer s.countsMu.Unlock()
	if s.countsReady.Load() {
		return nil
	}
	_, err := s.leaderGet(ctx, s.owners, countsKey)
	switch {
	case err == nil:
		s.countsReady.Store(true)
		return nil
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("store: read the counts of sessions: %w", err)
	}
	all, err := s.SessionOwners(ctx)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, o := range all {
		if counted(o) {
			counts[o]++
		}
	}
	for o, n := range counts {
		if _, err := s.owners.PutString(ctx, countKey(o), strconv.Itoa(n)); err != nil {
			return fmt.Errorf("store: record the counts of sessions: %w", err)
		}
	}
	if _, err := s.owners.PutString(ctx, countsKey, "1"); err != nil {
		return fmt.Errorf("store: record the counts of sessions: %w", err)
	}
	s.countsReady.Store(true)
	return nil
}

// markCounted marks a new, empty owners bucket as counted (Open).
func (s *Store) markCounted(ctx context.Context) error {
	st, err := s.owners.Status(ctx)
	if err != nil {
		return fmt.Errorf("store: bucket %s: %w", ownersBucket, err)
	}
	if st.Values() > 0 {
		return nil // made before: counted on first use (ensureCounts)
	}
	if _, err := s.owners.Create(ctx, countsKey, []byte("1")); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("store: bucket %s: %w", ownersBucket, err)
	}
	s.countsReady.Store(true)
	return nil
}
