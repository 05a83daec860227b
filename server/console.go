package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// ConsoleOptions configure a [Console].
type ConsoleOptions struct {
	// Server is the kernel whose API the console fronts; required.
	Server *Server
	// Tokens authenticate the sign-in; only operator tokens are accepted.
	// Required.
	Tokens *Tokens
	// Assets are the console's files, index.html at the root (package
	// console's Assets); required.
	Assets fs.FS
	// FrameOrigins are origins (scheme://host[:port]) iframe render
	// sources may load from, beyond those of the iframe sources registered
	// in live sessions when the page loads.
	FrameOrigins []string
	// WebComponentOrigins are the origins web-component render sources may
	// load scripts from. None by default: a web component runs with the
	// console's privileges, so the operator must allow its origin.
	WebComponentOrigins []string
	// SignInTTL is how long a sign-in lasts. Default 12 hours.
	SignInTTL time.Duration
	// Logger receives the console's logs; nil discards. Tokens and cookies
	// are never logged.
	Logger *slog.Logger
}

// Console is the operator's web console on its own listener:
//
//	GET  /                  the console (embedded assets)
//	POST /console/signin    {"token": "<operator token>"} → the sign-in cookie
//	POST /console/signout   ends the sign-in
//	GET  /console/me        {"name", "frameOrigins", "webComponentOrigins"}, or 401
//	     /v1/...            the kernel's API (see [Server]) as the signed-in operator
//
// The operator token is exchanged once for a random cookie (HttpOnly,
// SameSite=Strict, Secure over TLS); the token is never put in a URL, in
// storage or in a log. Every state-changing request and every WebSocket
// upgrade must carry an Origin equal to the console's own. Every response
// carries a strict Content-Security-Policy.
type Console struct {
	opts ConsoleOptions
	log  *slog.Logger
	mux  *http.ServeMux

	mu      sync.Mutex
	signins map[string]signin // cookie value → sign-in
}

type signin struct {
	peer    session.Peer
	expires time.Time
}

// consolePeerKey carries the signed-in operator from [Console] to the
// kernel's handlers (see Server.authenticate).
type consolePeerKey struct{}

const (
	consoleCookie = "brain_console"
	maxSignins    = 1024
)

// NewConsole returns the console handler.
func NewConsole(opts ConsoleOptions) *Console {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SignInTTL <= 0 {
		opts.SignInTTL = 12 * time.Hour
	}
	opts.FrameOrigins = cleanOrigins(opts.FrameOrigins)
	opts.WebComponentOrigins = cleanOrigins(opts.WebComponentOrigins)
	c := &Console{opts: opts, log: opts.Logger, mux: http.NewServeMux(), signins: map[string]signin{}}
	c.mux.HandleFunc("POST /console/signin", c.handleSignIn)
	c.mux.HandleFunc("POST /console/signout", c.handleSignOut)
	c.mux.HandleFunc("GET /console/me", c.handleMe)
	c.mux.HandleFunc("/v1/", c.handleAPI)
	c.mux.HandleFunc("/", c.handleAsset)
	return c
}

// ServeHTTP serves the routes above.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", c.csp())
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if !c.originOK(r) {
		httpError(w, http.StatusForbidden, "forbidden", "cross-origin request refused: the Origin header must be this console's own")
		return
	}
	c.mux.ServeHTTP(w, r)
}

// originOK applies the Origin check: a request that changes state (any
// method but GET and HEAD) or upgrades to a WebSocket must carry an Origin
// equal to the console's own scheme://host.
func (c *Console) originOK(r *http.Request) bool {
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if !upgrade && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return r.Header.Get("Origin") == scheme+"://"+r.Host
}

// csp is the Content-Security-Policy of every response: scripts only from
// the console itself (and allowed web-component origins), no inline script
// or style, frames only from the render sources' origins.
func (c *Console) csp() string {
	frames := slices.Clone(c.opts.FrameOrigins)
	frames = append(frames, c.registeredFrameOrigins()...)
	slices.Sort(frames)
	frames = slices.Compact(frames)
	frameSrc := "'none'"
	if len(frames) > 0 {
		frameSrc = strings.Join(frames, " ")
	}
	script := "'self'"
	if len(c.opts.WebComponentOrigins) > 0 {
		script += " " + strings.Join(c.opts.WebComponentOrigins, " ")
	}
	return "default-src 'none'; script-src " + script + "; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; frame-src " + frameSrc + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// registeredFrameOrigins returns the origins of the iframe render sources
// registered in live sessions.
func (c *Console) registeredFrameOrigins() []string {
	var out []string
	for _, s := range c.opts.Server.opts.Manager.liveSessions() {
		for _, cp := range s.Snapshot().Capabilities {
			if cp.Render != nil && cp.Render.Source.Kind == protocol.SourceIframe {
				if o := originOf(cp.Render.Source.URL); o != "" {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

var hostPattern = regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$`)

// originOf returns the scheme://host[:port] of an http(s) URL, or "" for
// anything else. The result goes into a CSP header: nothing but an origin
// may pass.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !hostPattern.MatchString(u.Host) {
		return ""
	}
	return u.Scheme + "://" + strings.ToLower(u.Host)
}

func cleanOrigins(in []string) []string {
	var out []string
	for _, o := range in {
		if v := originOf(o); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body); err != nil || body.Token == "" {
		httpError(w, http.StatusBadRequest, "invalid_request", `send {"token": "<operator token>"} as JSON`)
		return
	}
	p, ok := c.opts.Tokens.Peer(body.Token)
	if !ok {
		httpError(w, http.StatusUnauthorized, "unauthorized", "unknown token")
		return
	}
	if p.Side != session.SideOperator {
		httpError(w, http.StatusForbidden, "forbidden", "the console needs an operator token, not a "+string(p.Side)+" token")
		return
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	now := time.Now()
	c.mu.Lock()
	for k, s := range c.signins {
		if now.After(s.expires) {
			delete(c.signins, k)
		}
	}
	if len(c.signins) >= maxSignins {
		c.mu.Unlock()
		httpError(w, http.StatusServiceUnavailable, "unavailable", "too many sign-ins: sign out elsewhere or wait for them to expire")
		return
	}
	c.signins[id] = signin{peer: p, expires: now.Add(c.opts.SignInTTL)}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(c.opts.SignInTTL / time.Second)})
	c.log.Info("console sign-in", slog.String("operator", p.Name))
	writeJSON(w, http.StatusOK, map[string]string{"name": p.Name})
}

func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(consoleCookie); err == nil {
		c.mu.Lock()
		delete(c.signins, ck.Value)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

// signedIn returns the operator of the request's cookie.
func (c *Console) signedIn(r *http.Request) (session.Peer, bool) {
	ck, err := r.Cookie(consoleCookie)
	if err != nil || len(ck.Value) != 64 {
		return session.Peer{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var found *signin
	for k, s := range c.signins { // constant time in the cookie's value
		if subtle.ConstantTimeCompare([]byte(k), []byte(ck.Value)) == 1 {
			found = &s
		}
	}
	if found == nil || time.Now().After(found.expires) {
		return session.Peer{}, false
	}
	return found.peer, true
}

func (c *Console) handleMe(w http.ResponseWriter, r *http.Request) {
	p, ok := c.signedIn(r)
	if !ok {
		httpError(w, http.StatusUnauthorized, "unauthorized", "sign in with an operator token")
		return
	}
	frames := append(slices.Clone(c.opts.FrameOrigins), c.registeredFrameOrigins()...)
	writeJSON(w, http.StatusOK, map[string]any{"name": p.Name, "frameOrigins": frames,
		"webComponentOrigins": append([]string{}, c.opts.WebComponentOrigins...)})
}

// handleAPI serves the kernel's API as the signed-in operator; a bearer
// token is not accepted here (use the kernel's own listener).
func (c *Console) handleAPI(w http.ResponseWriter, r *http.Request) {
	p, ok := c.signedIn(r)
	if !ok {
		httpError(w, http.StatusUnauthorized, "unauthorized", "sign in with an operator token")
		return
	}
	r.Header.Del("Authorization")
	q := r.URL.Query()
	if q.Has("token") {
		q.Del("token")
		r.URL.RawQuery = q.Encode()
	}
	c.opts.Server.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), consolePeerKey{}, p)))
}

// assetTypes are the content types of the console's files.
var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
	".svg":  "image/svg+xml",
	".txt":  "text/plain; charset=utf-8",
}

func (c *Console) handleAsset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		httpError(w, http.StatusMethodNotAllowed, "invalid_request", "the console's files are read with GET")
		return
	}
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	typ, ok := assetTypes[path.Ext(name)]
	if !ok || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(c.opts.Assets, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", typ)
	_, _ = w.Write(b)
}
