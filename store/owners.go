package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ownersBucket is the key-value bucket recording who created each session:
// key the session id, value an opaque owner key (server.Manager stores a
// hash of the creating token), for the quota of sessions per token.
const ownersBucket = "brain_session_owners"

// SetSessionOwner records owner as the creator of session id, replacing
// any earlier record. The owner is opaque to the store, but for counting
// ([Store.SessionsOwned]): an owner that starts with "!" (a tombstone) is
// not counted.
func (s *Store) SetSessionOwner(ctx context.Context, id, owner string) error {
	if _, err := subjectFor(id); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	old, had, err := s.SessionOwner(ctx, id)
	if err != nil {
		return err
	}
	if err := s.retry(ctx, fmt.Sprintf("record the owner of session %q", id), func(ctx context.Context) error {
		_, err := s.owners.PutString(ctx, id, owner)
		return err
	}); err != nil {
		return fmt.Errorf("store: record the owner of session %q: %w", id, err)
	}
	if had && old == owner {
		return nil
	}
	if had {
		if err := s.countOwned(ctx, old, -1); err != nil {
			return err
		}
	}
	return s.countOwned(ctx, owner, +1)
}

// SessionOwner returns the owner recorded for session id, with ok false
// when none is.
func (s *Store) SessionOwner(ctx context.Context, id string) (owner string, ok bool, err error) {
	if _, err := subjectFor(id); err != nil {
		return "", false, err
	}
	if s.closed.Load() {
		return "", false, ErrClosed
	}
	var e kvEntry
	err = s.retry(ctx, fmt.Sprintf("read the owner of session %q", id), func(ctx context.Context) error {
		var err error
		e, err = s.leaderGet(ctx, s.owners, id)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("store: read the owner of session %q: %w", id, err)
	}
	return string(e.value), true, nil
}

// SessionOwners returns every recorded session owner by session id. It
// reads the whole bucket: its cost grows with the number of sessions.
func (s *Store) SessionOwners(ctx context.Context) (map[string]string, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	rctx, cancel := s.requestContext(ctx)
	defer cancel()
	w, err := s.owners.WatchAll(rctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("store: list session owners: %w", err)
	}
	defer func() { _ = w.Stop() }()
	out := map[string]string{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("store: list session owners: the watcher stopped")
			}
			if e == nil { // every current value has been delivered
				return out, nil
			}
			if e.Key() != probeKey && !internalKey(e.Key()) { // health.go's and owned.go's, no session's
				out[e.Key()] = string(e.Value())
			}
		case <-rctx.Done():
			return nil, fmt.Errorf("store: list session owners: %w", rctx.Err())
		}
	}
}

// deleteOwner removes the owner record of session id; none is not an error.
func (s *Store) deleteOwner(ctx context.Context, id string) error {
	old, had, err := s.SessionOwner(ctx, id)
	if err != nil {
		return err
	}
	err = s.retry(ctx, fmt.Sprintf("delete the owner of session %q", id), func(ctx context.Context) error {
		return s.owners.Purge(ctx, id)
	})
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("store: delete the owner of session %q: %w", id, err)
	}
	if had {
		return s.countOwned(ctx, old, -1)
	}
	return nil
}
