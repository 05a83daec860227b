package server

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// A client's page of GET /v1/sessions holds its tenant's sessions only,
// and may end short of its limit where its scan stopped (listScan): at a
// session of whichever tenant. Handing that id out as the next cursor
// told one tenant the ids of others — a probe recovered every id, by
// bisecting the cursors it passed in. So a client's next cursor is the
// position its page's scan reached, sealed: AES-GCM with a key derived
// from the store's secret, which every node of a cluster shares (a page
// read through one node goes on through another), or, without a store
// that keeps one, a key of the process's own. The holder of a sealed cursor learns nothing
// from it but that more sessions follow. A sealed cursor is bound to the
// tenant it was given to (the seal's additional data): another tenant's
// is refused. A client's cursor that is a plain session id (as an older
// brain gave them) must name a session of its own tenant
// (handleListSessions): any id at all let the same bisection go on with
// ids the client made up. An operator's cursors, which see every
// session, stay plain ids.
const sealedCursorPrefix = "c1."

// cursorSeal seals the sessions list's cursors of clients.
type cursorSeal struct {
	mu   sync.Mutex
	aead cipher.AEAD // nil until first needed
}

// secretKeeper is what a [Store] may offer to share a secret between the
// nodes (package store has it).
type secretKeeper interface {
	Secret(ctx context.Context) ([]byte, error)
}

// cipher returns the cursors' AEAD, made on first use from st's secret
// (or random bytes when st keeps none).
func (c *cursorSeal) cipher(ctx context.Context, st Store) (cipher.AEAD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aead != nil {
		return c.aead, nil
	}
	key := make([]byte, 32)
	if sk, ok := st.(secretKeeper); ok && st != nil {
		secret, err := sk.Secret(ctx)
		if err != nil {
			return nil, err
		}
		key = deriveKey(secret, "brain sessions list cursor v1")
	} else if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if c.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return c.aead, nil
}

// seal returns the cursor of a short page that ended at session id, for
// the tenant bound.
func (c *cursorSeal) seal(ctx context.Context, st Store, id, bound string) (string, error) {
	aead, err := c.cipher(ctx, st)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(id)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return sealedCursorPrefix + base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(id), []byte(bound))), nil
}

// errCursor is a cursor that is neither a session id nor one this
// service sealed.
var errCursor = errors.New("not a next cursor of a sessions page (list again from the first page)")

// open returns the position a cursor stands for: a session id as it is,
// a sealed cursor opened, if it was sealed for the tenant bound.
func (c *cursorSeal) open(ctx context.Context, st Store, cursor, bound string) (string, error) {
	sealed, ok := strings.CutPrefix(cursor, sealedCursorPrefix)
	if !ok {
		if cursor != "" && !ValidSessionID(cursor) {
			return "", errCursor
		}
		return cursor, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return "", errCursor
	}
	aead, err := c.cipher(ctx, st)
	if err != nil {
		return "", fmt.Errorf("open the cursor: %w", err)
	}
	if len(b) < aead.NonceSize() {
		return "", errCursor
	}
	id, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(bound))
	if err != nil || !ValidSessionID(string(id)) {
		return "", errCursor
	}
	return string(id), nil
}
