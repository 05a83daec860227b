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
	"unicode"

	"github.com/brainrt/brain/session"
)

// Token is one access token and the side it speaks for.
type Token struct {
	Token string `json:"token"`
	// Side is "client", "app", "environment" (a `brain env` process) or
	// "operator" (a person at the console).
	Side string `json:"side"`
	// App is the app id, for side "app".
	App string `json:"app,omitempty"`
	// Name is who holds the token: recorded as the authenticated identity
	// of what the token does (an operator's approvals record it as the
	// decider). Required for side "operator"; 1 to 64 printable
	// characters.
	Name string `json:"name,omitempty"`
}

// Tokens decides who a request is. The zero value accepts nobody.
type Tokens struct {
	list    []Token
	created []Token
}

// maxTokenName bounds a token's name.
const maxTokenName = 64

// NewTokens returns a token set; each token must be at least 16 bytes and
// name a valid side; an operator token needs a name.
func NewTokens(list ...Token) (*Tokens, error) {
	for i, t := range list {
		if len(t.Token) < 16 {
			return nil, fmt.Errorf("token %d: shorter than 16 characters", i)
		}
		switch {
		case (t.Side == "client" || t.Side == "environment") && t.App == "":
		case t.Side == "app" && t.App != "":
		case t.Side == "operator" && t.App == "":
			if t.Name == "" {
				return nil, fmt.Errorf("token %d: an operator token needs a name (who decides its approvals)", i)
			}
		default:
			return nil, fmt.Errorf("token %d: side must be client, environment, operator, or app with an app id", i)
		}
		if err := checkTokenName(t.Name); err != nil {
			return nil, fmt.Errorf("token %d: name: %w", i, err)
		}
	}
	return &Tokens{list: append([]Token(nil), list...)}, nil
}

func checkTokenName(n string) error {
	if len(n) > maxTokenName {
		return fmt.Errorf("longer than %d bytes", maxTokenName)
	}
	for _, r := range n {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%q holds a character that is not printable", n)
		}
	}
	return nil
}

// Peer returns the side a token speaks for, with the token's name. Every
// token is compared in constant time, so the time taken says nothing about
// which one matched.
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
	var p session.Peer
	switch found.Side {
	case "app":
		p = session.App(found.App)
	case "environment":
		p = session.Environment
	case "operator":
		return session.Operator(found.Name), true
	default:
		p = session.Client
	}
	p.Name = found.Name
	return p, true
}

// Created returns the tokens [LoadOrCreateTokens] created (and saved) in
// this call, so that the caller can print them once; nil otherwise.
func (t *Tokens) Created() []Token { return append([]Token(nil), t.created...) }

// tokenFile is the JSON of the tokens file under the data directory.
type tokenFile struct {
	Tokens []Token `json:"tokens"`
}

// DefaultOperatorName is the name of the operator token created at first
// start; edit tokens.json to name the person who holds it.
const DefaultOperatorName = "operator"

func randomToken() (string, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(raw[:]), nil
}

// LoadOrCreateTokens reads dir/tokens.json, or creates it (file mode 0600)
// with one random client token and one random operator token (named
// [DefaultOperatorName]) and reports created = true. A file without an
// operator token gets one added. [Tokens.Created] returns what was created
// so that the caller can print it once; client is the file's first client
// token.
func LoadOrCreateTokens(dir string) (tokens *Tokens, client string, created bool, err error) {
	path := filepath.Join(dir, "tokens.json")
	var f tokenFile
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		client, err = randomToken()
		if err != nil {
			return nil, "", false, err
		}
		f.Tokens = []Token{{Token: client, Side: "client"}}
	case err != nil:
		return nil, "", false, err
	default:
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return nil, "", false, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, "", false, fmt.Errorf("%s: %w", path, err)
		}
		if _, err := NewTokens(f.Tokens...); err != nil {
			return nil, "", false, fmt.Errorf("%s: %w", path, err)
		}
	}
	var added []Token
	if b == nil {
		added = append(added, f.Tokens...)
	}
	hasOperator := false
	for _, tk := range f.Tokens {
		hasOperator = hasOperator || tk.Side == "operator"
	}
	if !hasOperator {
		op, err := randomToken()
		if err != nil {
			return nil, "", false, err
		}
		tk := Token{Token: op, Side: "operator", Name: DefaultOperatorName}
		f.Tokens = append(f.Tokens, tk)
		added = append(added, tk)
	}
	if len(added) > 0 {
		out, _ := json.MarshalIndent(f, "", "  ")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", false, err
		}
		if err := writeFileAtomic(path, append(out, '\n')); err != nil {
			return nil, "", false, fmt.Errorf("write %s: %w", path, err)
		}
	}
	t, err := NewTokens(f.Tokens...)
	if err != nil {
		return nil, "", false, fmt.Errorf("%s: %w", path, err)
	}
	t.created = added
	for _, tk := range f.Tokens {
		if tk.Side == "client" {
			client = tk.Token
			break
		}
	}
	return t, client, len(added) > 0, nil
}

// writeFileAtomic writes b to path (mode 0600) through a temporary file
// and a rename, so that a crash never leaves half a tokens file.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tokens-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
