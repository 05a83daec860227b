package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// secretKey is the owners bucket's key of the store's secret: a
// "brain." key, the store's own, which no session id can be.
const secretKey = "brain.secret"

// SecretBytes is the size of [Store.Secret].
const SecretBytes = 32

// Secret returns 32 random bytes kept in the store, the same for every
// node sharing it and across restarts: made by the first node that asks
// (a create, which only one writer wins) and read by the others. The
// server seals with it what it hands out and must read back on any node,
// but that must not tell its holder anything (the sessions list's
// cursors). It is as secret as the store is: whoever reads the store's
// buckets reads it.
func (s *Store) Secret(ctx context.Context) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	fresh := make([]byte, SecretBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("store: make the store's secret: %w", err)
	}
	var out []byte
	err := s.retry(ctx, "read the store's secret", func(ctx context.Context) error {
		e, err := s.leaderGet(ctx, s.owners, secretKey)
		switch {
		case err == nil:
			out = e.value
			return nil
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return err
		}
		_, err = s.owners.Create(ctx, secretKey, fresh)
		switch {
		case err == nil:
			out = fresh
			return nil
		case !errors.Is(err, jetstream.ErrKeyExists):
			return err
		}
		// Another node made it meanwhile: read it.
		if e, err = s.leaderGet(ctx, s.owners, secretKey); err == nil {
			out = e.value
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: the store's secret: %w", err)
	}
	if len(out) != SecretBytes {
		return nil, fmt.Errorf("store: the store's secret at %s is %d bytes, want %d (delete the key and it is made again)", secretKey, len(out), SecretBytes)
	}
	return out, nil
}
