package server

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The console's credential (docs/console.md, "Signing in"): a sign-in is
// a cookie sealed with a key kept in the data directory, and a CSRF token
// derived from the sign-in by the same key. The cookie alone is worth
// nothing: browsers send it to every port of the console's host (cookies
// are scoped by host, not port), so any local server — an app's render
// iframe — may receive it. The CSRF token is handed to the console's page
// once, in the sign-in's response body, and kept in the console origin's
// localStorage, which no other port can read; every request of the
// console's API must carry it in a header (a WebSocket, which cannot set
// headers, in its subprotocol list). No request to another port ever
// carries it.

const (
	consoleKeyFile      = "console.key"
	consoleSignOutsFile = "console-signouts.json"
	// csrfHeader carries the CSRF token of API requests.
	csrfHeader = "X-Brain-Csrf"
	// wsProtocol is the subprotocol the console's WebSockets negotiate;
	// wsCSRFPrefix prefixes the one that carries the CSRF token.
	wsProtocol   = "brain.console"
	wsCSRFPrefix = "brain.csrf."
	sealVersion  = 1
	signinIDLen  = 16
)

// consoleKeys seal the console's cookies and derive its CSRF tokens. Two
// keys derived from one master key, so that a CSRF token can never be
// opened as a cookie or the other way round.
type consoleKeys struct {
	aead cipher.AEAD
	csrf []byte
}

func newConsoleKeys(master []byte) (*consoleKeys, error) {
	if len(master) != 32 {
		return nil, fmt.Errorf("the console key is %d bytes, want 32", len(master))
	}
	block, err := aes.NewCipher(deriveKey(master, "brain console cookie v1"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &consoleKeys{aead: aead, csrf: deriveKey(master, "brain console csrf v1")}, nil
}

// deriveKey derives a 32-byte key for one purpose, named by label, from
// a master key: HMAC-SHA256(master, label).
func deriveKey(master []byte, label string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// signinClaims is what a cookie holds: the sign-in's random id, when it
// expires, and the operator token it was made with (so that a token
// removed from tokens.json ends its sign-ins, and a renamed operator is
// shown with the new name). The token is encrypted: the cookie reaches
// other ports, the key never leaves the data directory.
type signinClaims struct {
	id      [signinIDLen]byte
	expires time.Time
	token   string
}

var consoleAAD = []byte("brain_console")

// seal returns the cookie value of c.
func (k *consoleKeys) seal(c signinClaims) string {
	plain := make([]byte, 0, 1+signinIDLen+8+len(c.token))
	plain = append(plain, sealVersion)
	plain = append(plain, c.id[:]...)
	plain = binary.BigEndian.AppendUint64(plain, uint64(c.expires.Unix()))
	plain = append(plain, c.token...)
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(k.aead.Seal(nonce, nonce, plain, consoleAAD))
}

// maxCookieBytes bounds a cookie value before it is decoded.
const maxCookieBytes = 1024

// open returns the claims of a cookie value sealed by k, or false for
// anything else: another key, a modified byte, another version.
func (k *consoleKeys) open(v string) (signinClaims, bool) {
	if len(v) > maxCookieBytes {
		return signinClaims{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	ns := k.aead.NonceSize()
	if err != nil || len(b) < ns+k.aead.Overhead() {
		return signinClaims{}, false
	}
	plain, err := k.aead.Open(nil, b[:ns], b[ns:], consoleAAD)
	if err != nil || len(plain) < 1+signinIDLen+8 || plain[0] != sealVersion {
		return signinClaims{}, false
	}
	var c signinClaims
	copy(c.id[:], plain[1:])
	c.expires = time.Unix(int64(binary.BigEndian.Uint64(plain[1+signinIDLen:])), 0)
	c.token = string(plain[1+signinIDLen+8:])
	return c, true
}

// csrfToken is the CSRF token of sign-in id: base64url of an HMAC, 43
// characters, valid as a WebSocket subprotocol token.
func (k *consoleKeys) csrfToken(id [signinIDLen]byte) string {
	m := hmac.New(sha256.New, k.csrf)
	m.Write(id[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfOK reports whether got is the CSRF token of sign-in id, in
// constant time.
func (k *consoleKeys) csrfOK(id [signinIDLen]byte, got string) bool {
	return got != "" && hmac.Equal([]byte(k.csrfToken(id)), []byte(got))
}

// LoadConsoleKey reads the console's sealing key from dir/console.key, or
// creates it (32 random bytes, hex, mode 0600) when absent. A key file
// readable by others is refused, as tokens.json is.
func LoadConsoleKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, consoleKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(path, []byte(hex.EncodeToString(key)+"\n")); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		return key, nil
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	key, err := hex.DecodeString(string(trimSpace(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%s: want 64 hex digits (32 bytes); delete the file to make a new key, which ends every sign-in", path)
	}
	return key, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// signOuts are the sign-ins ended with sign-out before they expired,
// kept (in dir/console-signouts.json when the console has a directory)
// until they expire, so that a cookie signed out stays signed out after a
// restart. Growth is bounded by the sign-in rate limit and the TTL.
type signOuts struct {
	path string // "" keeps them in memory
	mu   sync.Mutex
	ids  map[[signinIDLen]byte]time.Time
	// revoked are the operator tokens removed from the tokens, by their
	// SHA-256, with when: a sign-in made with one before then stays ended
	// when the same token is put back (revokedSignIn).
	revoked map[[sha256.Size]byte]time.Time
}

type signOutFile struct {
	SignOuts []signOutEntry `json:"signouts"`
	// Revoked is read by this version on; an older one ignores it.
	Revoked []revokedEntry `json:"revokedTokens,omitempty"`
}

type revokedEntry struct {
	Token string    `json:"sha256"`
	At    time.Time `json:"at"`
}

type signOutEntry struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

func loadSignOuts(dir string) (*signOuts, error) {
	so := &signOuts{ids: map[[signinIDLen]byte]time.Time{}, revoked: map[[sha256.Size]byte]time.Time{}}
	if dir == "" {
		return so, nil
	}
	so.path = filepath.Join(dir, consoleSignOutsFile)
	b, err := os.ReadFile(so.path)
	if errors.Is(err, os.ErrNotExist) {
		return so, nil
	}
	if err != nil {
		return nil, err
	}
	var f signOutFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w (delete it to forget past sign-outs)", so.path, err)
	}
	for i, e := range f.SignOuts {
		raw, err := hex.DecodeString(e.ID)
		if err != nil || len(raw) != signinIDLen {
			return nil, fmt.Errorf("%s: signouts[%d]: id %q is not %d hex bytes", so.path, i, e.ID, signinIDLen)
		}
		so.ids[[signinIDLen]byte(raw)] = e.Expires
	}
	for i, e := range f.Revoked {
		raw, err := hex.DecodeString(e.Token)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%s: revokedTokens[%d]: %q is not a SHA-256 in hex", so.path, i, e.Token)
		}
		so.revoked[[sha256.Size]byte(raw)] = e.At
	}
	return so, nil
}

// revoke records that the operator token with SHA-256 sum was removed
// at now, and writes the file; ttl is how long a sign-in lasts, past
// which the record is of no use.
func (so *signOuts) revoke(sum [sha256.Size]byte, now time.Time, ttl time.Duration) error {
	so.mu.Lock()
	defer so.mu.Unlock()
	so.revoked[sum] = now
	return so.saveLocked(now, ttl)
}

// revokedUntil returns the latest expiry a sign-in made with token before
// its removal can have (a sign-in lasts ttl, its expiry in whole
// seconds), and whether the token was removed: a sign-in expiring then or
// before was ended by the removal, and stays ended when the token is put
// back (revokedSignIn); one made after has a later expiry (handleSignIn
// makes sure of it, within the second).
func (so *signOuts) revokedUntil(token string, ttl time.Duration) (time.Time, bool) {
	so.mu.Lock()
	defer so.mu.Unlock()
	at, ok := so.revoked[sha256.Sum256([]byte(token))]
	if !ok {
		return time.Time{}, false
	}
	until := at.Add(ttl)
	if r := until.Truncate(time.Second); r.Before(until) {
		until = r.Add(time.Second)
	}
	return until, true
}

// revokedSignIn reports whether the removal of token ended a sign-in made
// with it that expires at expires.
func (so *signOuts) revokedSignIn(token string, expires time.Time, ttl time.Duration) bool {
	until, ok := so.revokedUntil(token, ttl)
	return ok && !expires.After(until)
}

func (so *signOuts) has(id [signinIDLen]byte) bool {
	so.mu.Lock()
	defer so.mu.Unlock()
	_, ok := so.ids[id]
	return ok
}

// add records a sign-out and writes the file, dropping the expired ones.
func (so *signOuts) add(id [signinIDLen]byte, expires, now time.Time, ttl time.Duration) error {
	so.mu.Lock()
	defer so.mu.Unlock()
	so.ids[id] = expires
	return so.saveLocked(now, ttl)
}

// saveLocked writes the file, dropping what no sign-in can be ended by
// any more: sign-outs past their expiry, removals older than a sign-in
// lasts (ttl).
func (so *signOuts) saveLocked(now time.Time, ttl time.Duration) error {
	var f signOutFile
	for k, exp := range so.ids {
		if now.After(exp) {
			delete(so.ids, k)
			continue
		}
		f.SignOuts = append(f.SignOuts, signOutEntry{ID: hex.EncodeToString(k[:]), Expires: exp.UTC()})
	}
	for k, at := range so.revoked {
		if now.After(at.Add(ttl)) {
			delete(so.revoked, k)
			continue
		}
		f.Revoked = append(f.Revoked, revokedEntry{Token: hex.EncodeToString(k[:]), At: at.UTC()})
	}
	if so.path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	return writeFileAtomic(so.path, append(b, '\n'))
}
