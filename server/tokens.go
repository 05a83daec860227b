package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/brainrt/brain/session"
)

// Token is one access token and the side it speaks for.
type Token struct {
	Token string `json:"token"`
	// Side is "client", "app" or "environment" (a `brain env` process).
	Side string `json:"side"`
	// App is the app id, for side "app".
	App string `json:"app,omitempty"`
}

// Tokens decides who a request is. The zero value accepts nobody.
type Tokens struct {
	list []Token
}

// NewTokens returns a token set; each token must be at least 16 bytes and
// name a valid side.
func NewTokens(list ...Token) (*Tokens, error) {
	for i, t := range list {
		if len(t.Token) < 16 {
			return nil, fmt.Errorf("token %d: shorter than 16 characters", i)
		}
		switch {
		case (t.Side == "client" || t.Side == "environment") && t.App == "":
		case t.Side == "app" && t.App != "":
		default:
			return nil, fmt.Errorf("token %d: side must be client, environment, or app with an app id", i)
		}
	}
	return &Tokens{list: list}, nil
}

// Peer returns the side a token speaks for. Every token is compared in
// constant time, so the time taken says nothing about which one matched.
func (t *Tokens) Peer(token string) (session.Peer, bool) {
	var found *Token
	for i := range t.list {
		if subtle.ConstantTimeCompare([]byte(t.list[i].Token), []byte(token)) == 1 {
			found = &t.list[i]
		}
	}
	if found == nil || token == "" {
		return session.Peer{}, false
	}
	switch found.Side {
	case "app":
		return session.App(found.App), true
	case "environment":
		return session.Environment, true
	}
	return session.Client, true
}

// tokenFile is the JSON of the tokens file under the data directory.
type tokenFile struct {
	Tokens []Token `json:"tokens"`
}

// LoadOrCreateTokens reads dir/tokens.json, or creates it with one random
// client token (file mode 0600) and reports created = true so the caller
// can print it once.
func LoadOrCreateTokens(dir string) (tokens *Tokens, client string, created bool, err error) {
	path := filepath.Join(dir, "tokens.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var raw [24]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return nil, "", false, err
		}
		client = hex.EncodeToString(raw[:])
		f := tokenFile{Tokens: []Token{{Token: client, Side: "client"}}}
		b, _ := json.MarshalIndent(f, "", "  ")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", false, err
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return nil, "", false, fmt.Errorf("write %s: %w", path, err)
		}
		t, err := NewTokens(f.Tokens...)
		return t, client, true, err
	}
	if err != nil {
		return nil, "", false, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, "", false, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	var f tokenFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, "", false, fmt.Errorf("%s: %w", path, err)
	}
	t, err := NewTokens(f.Tokens...)
	if err != nil {
		return nil, "", false, fmt.Errorf("%s: %w", path, err)
	}
	for _, tk := range f.Tokens {
		if tk.Side == "client" {
			client = tk.Token
			break
		}
	}
	return t, client, false, nil
}
