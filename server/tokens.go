package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/brainrt/brain/internal/regularfile"
	"github.com/brainrt/brain/session"
)

// Token is one access token and the side it speaks for.
type Token struct {
	Token string `json:"token"`
	// Side is "client", "app", "environment" (a `brain env` process),
	// "model" (an agent driver or MCP host: the MCP endpoint only) or
	// "operator" (a person at the console).
	Side string `json:"side"`
	// App is the app id, for side "app".
	App string `json:"app,omitempty"`
	// Name is who holds the token: recorded as the authenticated identity
	// of what the token does (an operator's approvals record it as the
	// decider). Required for side "operator"; 1 to 64 printable
	// characters.
	Name string `json:"name,omitempty"`
	// Tenant names the tenant the token belongs to: a session belongs to
	// the tenant of the token that created it, and only tokens of that
	// tenant (and operators) reach it. A token without a tenant is a
	// tenant of its own. Not for operators, who reach every session. 1 to
	// 64 printable characters.
	Tenant string `json:"tenant,omitempty"`
}

// Token sides.
const (
	SideClient      = "client"
	SideApp         = "app"
	SideEnvironment = "environment"
	SideModel       = "model"
	SideOperator    = "operator"
)

// Principal is who a request is: the peer it speaks for in a session, and
// the tenant whose sessions it reaches.
type Principal struct {
	Peer session.Peer
	// Model is set for a model token: it reaches only the MCP endpoint.
	Model bool
	// owners are the owner keys of the sessions the principal reaches:
	// its tenant's first (the one its new sessions are recorded under),
	// then, for a token with a tenant, the token's own (sessions it
	// created before it had one). Empty for operators, who reach all.
	owners []string
}

// Operator reports whether p is an operator, who reaches every session.
func (p Principal) Operator() bool { return p.Peer.Side == session.SideOperator }

// tenantKey is the owner key of p's tenant ("" for an operator).
func (p Principal) tenantKey() string {
	if len(p.owners) == 0 {
		return ""
	}
	return p.owners[0]
}

// reaches reports whether p may see a session recorded under owner.
func (p Principal) reaches(owner string) bool {
	if p.Operator() {
		return true
	}
	for _, o := range p.owners {
		if o != "" && o == owner {
			return true
		}
	}
	return false
}

// Tokens decides who a request is. The zero value accepts nobody. It is
// safe for concurrent use; [Tokens.Replace] swaps the set while requests
// are served.
type Tokens struct {
	mu      sync.RWMutex
	list    []Token
	created []Token
	// replaced are called after each Replace (OnReplace).
	replaced []func()
	// ends are the ends of the sockets each token opened (tokens_end.go).
	ends map[string]*tokenEnd
}

// maxTokenName bounds a token's name and tenant.
const maxTokenName = 64

// NewTokens returns a token set; each token must be at least 16 bytes and
// name a valid side; an operator token needs a name and has no tenant.
func NewTokens(list ...Token) (*Tokens, error) {
	if err := checkTokens(list); err != nil {
		return nil, err
	}
	return &Tokens{list: append([]Token(nil), list...)}, nil
}

func checkTokens(list []Token) error {
	seen := map[string]bool{}
	for i, t := range list {
		if len(t.Token) < 16 {
			return fmt.Errorf("token %d: shorter than 16 characters", i)
		}
		if seen[t.Token] {
			return fmt.Errorf("token %d: the same token is listed twice", i)
		}
		seen[t.Token] = true
		switch {
		case (t.Side == SideClient || t.Side == SideEnvironment || t.Side == SideModel) && t.App == "":
		case t.Side == SideApp && t.App != "":
		case t.Side == SideOperator && t.App == "":
			if t.Name == "" {
				return fmt.Errorf("token %d: an operator token needs a name (who decides its approvals)", i)
			}
			if t.Tenant != "" {
				return fmt.Errorf("token %d: an operator reaches every session: it has no tenant", i)
			}
		default:
			return fmt.Errorf("token %d: side must be client, model, environment, operator, or app with an app id", i)
		}
		if err := checkTokenName(t.Name); err != nil {
			return fmt.Errorf("token %d: name: %w", i, err)
		}
		if err := checkTokenName(t.Tenant); err != nil {
			return fmt.Errorf("token %d: tenant: %w", i, err)
		}
	}
	return nil
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

// Replace swaps the token set for list, checked as [NewTokens] checks it;
// on error nothing changes. Requests already authenticated go on, but the
// WebSockets of a token list no longer grants as before close ([Tokens.End]);
// the next requests are decided by list (a removed token is refused from
// then on).
func (t *Tokens) Replace(list []Token) error {
	if err := checkTokens(list); err != nil {
		return err
	}
	t.mu.Lock()
	t.list = append([]Token(nil), list...)
	hooks := slices.Clone(t.replaced)
	ended := t.revokeEnds(list)
	t.mu.Unlock()
	for _, end := range ended {
		end(errTokenRevoked)
	}
	for _, f := range hooks {
		f()
	}
	return nil
}

// OnReplace has f called after every [Tokens.Replace], once the new
// tokens are in use: what was granted to a token at one moment (the
// console's open WebSockets) is checked again when the tokens change.
func (t *Tokens) OnReplace(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replaced = append(t.replaced, f)
}

// Peer returns the side a token speaks for, with the token's name. See
// [Tokens.Identify].
func (t *Tokens) Peer(token string) (session.Peer, bool) {
	p, ok := t.Identify(token)
	return p.Peer, ok
}

// Identify returns who a token is. Every token is compared in constant
// time, so the time taken says nothing about which one matched.
func (t *Tokens) Identify(token string) (Principal, bool) {
	t.mu.RLock()
	var found Token
	ok := false
	for i := range t.list {
		if subtle.ConstantTimeCompare([]byte(t.list[i].Token), []byte(token)) == 1 {
			found, ok = t.list[i], true
		}
	}
	t.mu.RUnlock()
	if !ok || token == "" {
		return Principal{}, false
	}
	var pr Principal
	switch found.Side {
	case SideApp:
		pr.Peer = session.App(found.App)
	case SideEnvironment:
		pr.Peer = session.Environment
	case SideOperator:
		pr.Peer = session.Operator(found.Name)
		return pr, true
	case SideModel:
		pr.Peer, pr.Model = session.Peer{Side: session.SideModel}, true
	default:
		pr.Peer = session.Client
	}
	pr.Peer.Name = found.Name
	own := ownerKey(found.Token)
	if found.Tenant != "" {
		pr.owners = []string{"tenant:" + found.Tenant, own}
	} else {
		pr.owners = []string{own}
	}
	return pr, true
}

// ownerKey names a token without a tenant as the owner of its sessions,
// without keeping the token itself: a hash of it. Sessions created before
// tenants existed were recorded under it.
func ownerKey(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:8])
}

// Created returns the tokens [LoadOrCreateTokens] created (and saved) in
// this call, so that the caller can print them once; nil otherwise.
func (t *Tokens) Created() []Token {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return append([]Token(nil), t.created...)
}

// tokenFile is the JSON of the tokens file under the data directory.
type tokenFile struct {
	Tokens []Token `json:"tokens"`
}

// DefaultOperatorName is the name of the operator token created at first
// start; edit tokens.json to name the person who holds it.
const DefaultOperatorName = "operator"

// DefaultTenant is the tenant of the client and model tokens created at
// first start: the model token reaches the client's sessions.
const DefaultTenant = "default"

func randomToken() (string, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(raw[:]), nil
}

// maxTokensFile bounds tokens.json: a token a line of some 200 bytes,
// far more tokens than a kernel holds.
const maxTokensFile = 16 << 20

// ReadTokens reads a tokens file (dir/tokens.json) strictly: it must exist,
// be private to its owner (mode 0600) and hold valid tokens.
func ReadTokens(path string) ([]Token, error) {
	b, err := regularfile.Read(path, maxTokensFile) // a named pipe there held the start for ever (a re-probe)
	if err != nil {
		return nil, err
	}
	return parseTokens(path, b)
}

// parseTokens is ReadTokens of the file's bytes b, read from path.
func parseTokens(path string, b []byte) ([]Token, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	// Strict: a misspelt key ("tenat") was dropped, and the token went to
	// a tenant of its own — another tenant than meant — while brain's next
	// rewrite of the file erased the typo.
	var f tokenFile
	if err := decodeStrict(b, &f); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return nil, fmt.Errorf("%s: %w (a token's keys are token, side, name, tenant and app, in an object under \"tokens\")", path, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkTokens(f.Tokens); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Tokens, nil
}

// LoadOrCreateTokens reads dir/tokens.json, or creates it (file mode 0600)
// with one random client token and one random model token, both of tenant
// [DefaultTenant], and one random operator token (named
// [DefaultOperatorName]), and reports created = true. A file without an
// operator token gets one added; a file without a model token gets one
// added too — of the tenant of its only client token, which gets
// [DefaultTenant] if it had none (so that the model token reaches its
// sessions); with several client tokens the model token is a tenant of
// its own. [Tokens.Created] returns what was created so that the caller
// can print it once; client is the file's first client token.
func LoadOrCreateTokens(dir string) (tokens *Tokens, client string, created bool, err error) {
	path := filepath.Join(dir, "tokens.json")
	var f tokenFile
	fresh := false
	switch list, err := ReadTokens(path); {
	case errors.Is(err, os.ErrNotExist):
		fresh = true
	case err != nil:
		return nil, "", false, err
	default:
		f.Tokens = list
	}
	var added []Token
	add := func(tk Token) error {
		v, err := randomToken()
		if err != nil {
			return err
		}
		tk.Token = v
		f.Tokens = append(f.Tokens, tk)
		added = append(added, tk)
		return nil
	}
	has := func(side string) bool {
		for _, tk := range f.Tokens {
			if tk.Side == side {
				return true
			}
		}
		return false
	}
	if fresh {
		if err := add(Token{Side: SideClient, Tenant: DefaultTenant}); err != nil {
			return nil, "", false, err
		}
	}
	if !has(SideModel) {
		tenant := ""
		var clients []int
		for i, tk := range f.Tokens {
			if tk.Side == SideClient {
				clients = append(clients, i)
			}
		}
		if len(clients) == 1 {
			c := &f.Tokens[clients[0]]
			if c.Tenant == "" {
				c.Tenant = DefaultTenant // its earlier sessions stay its own: they were recorded under the token
			}
			tenant = c.Tenant
		}
		if err := add(Token{Side: SideModel, Tenant: tenant}); err != nil {
			return nil, "", false, err
		}
	}
	if !has(SideOperator) {
		if err := add(Token{Side: SideOperator, Name: DefaultOperatorName}); err != nil {
			return nil, "", false, err
		}
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
		if tk.Side == SideClient {
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

// operatorSums returns the SHA-256 sums of the operator tokens.
func (t *Tokens) operatorSums() map[[sha256.Size]byte]struct{} {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := map[[sha256.Size]byte]struct{}{}
	for _, tk := range t.list {
		if tk.Side == string(session.SideOperator) {
			out[sha256.Sum256([]byte(tk.Token))] = struct{}{}
		}
	}
	return out
}
