package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
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
	// Dir is where the console keeps its sealing key (console.key, mode
	// 0600, made at the first start) and the sign-ins ended by sign-out
	// (console-signouts.json): the data directory, beside tokens.json. A
	// sign-in is a cookie sealed with that key, so it is still good after
	// a restart. Empty: a key made in memory, and a restart ends every
	// sign-in.
	Dir string
	// Hosts are the host names (without a port) the console answers to
	// beyond IP literals and localhost, e.g. the name of a TLS listener.
	// A request with any other Host is refused (DNS rebinding).
	Hosts []string
	// Model is the name of the model the kernel runs turns on, "" for
	// none: the console's message box is enabled only with one.
	Model string
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
	// Logger receives the console's logs; nil discards. Tokens, cookies
	// and CSRF tokens are never logged.
	Logger *slog.Logger
}

// Console is the operator's web console on its own listener:
//
//	GET  /                  the console (embedded assets)
//	POST /console/signin    {"token": "<operator token>"} → the cookie, and {"name", "csrf"}
//	POST /console/signout   ends the sign-in
//	GET  /console/me        {"name", "model", "frameOrigins", "webComponentOrigins"}, or 401
//	     /v1/...            the kernel's API (see [Server]) as the signed-in operator
//
// The operator token is exchanged once for a sealed cookie (HttpOnly,
// SameSite=Strict, Secure over TLS) and a CSRF token; the operator token
// is never put in a URL, in storage or in a log. The cookie alone opens
// nothing: every request of /console/me and /v1/ must carry the sign-in's
// CSRF token too, in the X-Brain-Csrf header (a WebSocket upgrade: as its
// "brain.csrf.<token>" subprotocol, beside "brain.console"), which the
// browser never sends anywhere by itself. Every request must name the
// console in its Host (an IP literal, localhost or a configured name);
// every state-changing request and every WebSocket upgrade must carry an
// Origin equal to the console's own; sign-in attempts are rate-limited
// per client address. Every response carries a strict
// Content-Security-Policy.
type Console struct {
	opts     ConsoleOptions
	log      *slog.Logger
	mux      *http.ServeMux
	keys     *consoleKeys
	signOuts *signOuts
	ends     signInEnds // the ends of the sign-ins' open sockets (console_ends.go)
	limiter  *signInLimiter
	now      func() time.Time
}

// consolePeerKey carries the signed-in operator from [Console] to the
// kernel's handlers (see Server.authenticate).
type consolePeerKey struct{}

const consoleCookie = "brain_console"

// NewConsole returns the console handler. It fails when the key or the
// sign-outs in opts.Dir cannot be read or made.
func NewConsole(opts ConsoleOptions) (*Console, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SignInTTL <= 0 {
		opts.SignInTTL = 12 * time.Hour
	}
	opts.FrameOrigins = cleanOrigins(opts.FrameOrigins)
	opts.WebComponentOrigins = cleanOrigins(opts.WebComponentOrigins)
	hosts := make([]string, 0, len(opts.Hosts))
	for _, h := range opts.Hosts {
		hosts = append(hosts, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	opts.Hosts = hosts
	var master []byte
	if opts.Dir == "" {
		master = make([]byte, 32)
		_, _ = rand.Read(master)
	} else {
		var err error
		if master, err = LoadConsoleKey(opts.Dir); err != nil {
			return nil, fmt.Errorf("console key: %w", err)
		}
	}
	keys, err := newConsoleKeys(master)
	if err != nil {
		return nil, err
	}
	so, err := loadSignOuts(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("console sign-outs: %w", err)
	}
	c := &Console{opts: opts, log: opts.Logger, mux: http.NewServeMux(), keys: keys, signOuts: so, now: time.Now}
	c.limiter = newSignInLimiter(func() time.Time { return c.now() })
	if opts.Tokens != nil {
		ops := opts.Tokens.operatorSums()
		var opsMu sync.Mutex
		opts.Tokens.OnReplace(func() {
			// An operator token removed ends its sign-ins for good, even
			// if the same token is put back (console_seal.go, revoke).
			now := opts.Tokens.operatorSums()
			opsMu.Lock()
			for sum := range ops {
				if _, kept := now[sum]; !kept {
					if err := c.signOuts.revoke(sum, c.now(), c.opts.SignInTTL); err != nil {
						c.log.Error("console: the removal of an operator token not saved", slog.String("error", err.Error()))
					}
				}
			}
			ops = now
			opsMu.Unlock()
			c.ends.recheck(opts.Tokens)
		})
	}
	c.mux.HandleFunc("POST /console/signin", c.handleSignIn)
	c.mux.HandleFunc("POST /console/signout", c.handleSignOut)
	c.mux.HandleFunc("GET /console/me", c.handleMe)
	c.mux.HandleFunc("/v1/", c.handleAPI)
	c.mux.HandleFunc("/", c.handleAsset)
	return c, nil
}

// ServeHTTP serves the routes above.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", c.csp(r))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if !c.hostOK(r) {
		httpError(w, http.StatusMisdirectedRequest, "forbidden", "this console does not answer to the host "+strconv.Quote(r.Host)+": reach it by an IP address or localhost, or add the name to console.hosts in the serve config")
		return
	}
	if why := c.originRefused(r); why != "" {
		httpError(w, http.StatusForbidden, "forbidden", "cross-origin request refused: "+why)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// originRefused applies the Origin check: a request that changes state (any
// method but GET and HEAD) or upgrades to a WebSocket must carry an Origin
// equal to the console's own scheme://host, and any request that carries
// an Origin at all must carry that one. A browser's request to the
// console's API (/console/, /v1/) must also not say it came from another
// origin (Sec-Fetch-Site: a page on another port of this host is
// "same-site", not "same-origin"). It returns why a request is refused,
// naming the header, or "".
func (c *Console) originRefused(r *http.Request) string {
	own := ownOrigin(r)
	if o := r.Header.Get("Origin"); o != "" && o != own {
		return "the Origin header is " + o + ", and must be this console's own, " + own
	}
	if strings.HasPrefix(r.URL.Path, "/v1/") || strings.HasPrefix(r.URL.Path, "/console/") {
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
			return "Sec-Fetch-Site is " + site + ": the console's API answers its own pages only (same-origin)"
		}
	}
	if !isWebSocketHandshake(r) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return ""
	}
	if r.Header.Get("Origin") == "" {
		return "a request that changes something (or opens a WebSocket) must carry an Origin header, this console's own: " + own
	}
	return ""
}

// ownOrigin is the console's origin as the request reached it.
func ownOrigin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// csp is the Content-Security-Policy of every response: scripts only from
// the console itself (and allowed web-component origins), no inline script
// or style, frames only from the render sources' origins, never the
// console's own.
func (c *Console) csp(r *http.Request) string {
	frames := c.frameOrigins(r)
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

// frameOrigins are the origins render iframes may load from: the
// configured ones and those of the iframe sources registered in live
// sessions, sorted, without the console's own (a frame of the console's
// origin would share its storage, and so its CSRF token).
func (c *Console) frameOrigins(r *http.Request) []string {
	frames := slices.Clone(c.opts.FrameOrigins)
	frames = append(frames, c.registeredFrameOrigins()...)
	own := strings.ToLower(ownOrigin(r))
	frames = slices.DeleteFunc(frames, func(o string) bool { return o == own || c.mayBeOwn(o, r) })
	slices.Sort(frames)
	if frames = slices.Compact(frames); frames == nil {
		frames = []string{} // [] in /console/me, as webComponentOrigins, not null
	}
	return frames
}

// mayBeOwn reports whether origin o may be the console under another
// name than the request's: its port is the console listener's and its
// host a name the console answers to — an IP address, localhost, or a
// name of console.hosts (checkHost). A probe's frame-src held
// http://localhost:<port> beside the console's http://127.0.0.1:<port>.
// Another service at the same port on another address is left out too:
// its renders fall back to their markdown.
func (c *Console) mayBeOwn(o string, r *http.Request) bool {
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	_, ownPort, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != ownPort {
		return false
	}
	host := strings.ToLower(u.Hostname())
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host) != nil || slices.Contains(c.opts.Hosts, host)
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
	if ok, wait := c.limiter.allow(r.RemoteAddr); !ok {
		secs := int(wait/time.Second) + 1
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		httpError(w, http.StatusTooManyRequests, "quota_exceeded", fmt.Sprintf("too many sign-in attempts from this address: try again in %d s", secs))
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	data, ok := readBody(w, r, 4096, "invalid_request", `the sign-in takes {"token": "<operator token>"} as JSON, at most 4,096 bytes`)
	if !ok {
		return
	}
	if err := json.Unmarshal(data, &body); err != nil {
		httpError(w, http.StatusBadRequest, "invalid_request", `the sign-in takes {"token": "<operator token>"} as JSON`)
		return
	}
	body.Token = strings.TrimSpace(body.Token)
	if body.Token == "" {
		httpError(w, http.StatusBadRequest, "invalid_request", "paste the operator token: brain serve printed it at its first start, and it is in tokens.json in the data directory")
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
	cl := signinClaims{expires: c.now().Add(c.opts.SignInTTL).Truncate(time.Second), token: body.Token}
	if until, ok := c.signOuts.revokedUntil(body.Token, c.opts.SignInTTL); ok && !cl.expires.After(until) {
		// Made in the second the token was removed in (and put back): a
		// second more tells this sign-in from those the removal ended.
		cl.expires = until.Add(time.Second)
	}
	_, _ = rand.Read(cl.id[:])
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: c.keys.seal(cl), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(c.opts.SignInTTL / time.Second)})
	c.log.Info("console sign-in", slog.String("operator", p.Name))
	writeJSON(w, http.StatusOK, map[string]string{"name": p.Name, "csrf": c.keys.csrfToken(cl.id)})
}

// handleSignOut ends the sign-in: with its CSRF token, for good (the
// sign-in's id is recorded until it expires, across restarts); without,
// only the requester's cookie is cleared.
func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request) {
	if cl, ok := c.claims(r); ok && c.keys.csrfOK(cl.id, r.Header.Get(csrfHeader)) {
		if err := c.signOuts.add(cl.id, cl.expires, c.now(), c.opts.SignInTTL); err != nil {
			c.log.Error("console sign-out not saved", slog.String("error", err.Error()))
		}
		c.ends.end(cl.id) // its open sockets close too
	}
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

// claims opens the request's cookie: a sign-in that has not expired and
// was not signed out.
func (c *Console) claims(r *http.Request) (signinClaims, bool) {
	ck, err := r.Cookie(consoleCookie)
	if err != nil {
		return signinClaims{}, false
	}
	cl, ok := c.keys.open(ck.Value)
	if !ok || !c.now().Before(cl.expires) || c.signOuts.has(cl.id) || c.signOuts.revokedSignIn(cl.token, cl.expires, c.opts.SignInTTL) {
		return signinClaims{}, false
	}
	return cl, true
}

// signedIn returns the operator of a request that carries both the
// sign-in's cookie and its CSRF token (csrf, from a header or a
// subprotocol). The operator token sealed in the cookie must still be an
// operator token: one removed from tokens.json ends its sign-ins.
func (c *Console) signedIn(r *http.Request, csrf string) (session.Peer, bool) {
	cl, ok := c.claims(r)
	if !ok || !c.keys.csrfOK(cl.id, csrf) {
		return session.Peer{}, false
	}
	p, ok := c.opts.Tokens.Peer(cl.token)
	if !ok || p.Side != session.SideOperator {
		return session.Peer{}, false
	}
	return p, true
}

// notSignedIn answers a request signedIn refused, saying which of its
// parts was missing or wrong (a probe, holding a good cookie without the
// CSRF token, was told only to sign in).
func (c *Console) notSignedIn(w http.ResponseWriter, r *http.Request, csrf string, upgrade bool) {
	msg := "sign in with an operator token"
	_, err := r.Cookie(consoleCookie)
	cl, open := c.claims(r)
	switch {
	case err != nil && r.Header.Get("Authorization") != "":
		msg = "the console takes no bearer token (use the kernel's own listener for one): sign in with an operator token"
	case err != nil:
		// No sign-in cookie: the message above.
	case !open:
		msg = "your sign-in ended (it expired, was signed out, or its operator token was removed): sign in again"
	case !c.keys.csrfOK(cl.id, csrf) && upgrade:
		msg = "the sign-in's CSRF token is missing or wrong: offer the subprotocols " + wsProtocol + " and " + wsCSRFPrefix + "<token>, with the token /console/signin gave"
	case !c.keys.csrfOK(cl.id, csrf):
		msg = "the sign-in's CSRF token is missing or wrong: send it in the " + csrfHeader + " header, as /console/signin gave it"
	default:
		msg = "this sign-in's token is no longer an operator token: sign in again"
	}
	httpError(w, http.StatusUnauthorized, "unauthorized", msg)
}

func (c *Console) handleMe(w http.ResponseWriter, r *http.Request) {
	p, ok := c.signedIn(r, r.Header.Get(csrfHeader))
	if !ok {
		c.notSignedIn(w, r, r.Header.Get(csrfHeader), false)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": p.Name, "model": c.opts.Model, "frameOrigins": c.frameOrigins(r),
		"webComponentOrigins": append([]string{}, c.opts.WebComponentOrigins...)})
}

// handleAPI serves the kernel's API as the signed-in operator; a bearer
// token is not accepted here (use the kernel's own listener). A WebSocket
// upgrade carries the CSRF token as a subprotocol, which is taken off the
// request before the kernel sees it; the response names "brain.console".
func (c *Console) handleAPI(w http.ResponseWriter, r *http.Request) {
	csrf := r.Header.Get(csrfHeader)
	upgrade := isWebSocketHandshake(r)
	if upgrade {
		csrf = ""
		offered := false
		for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
			for _, p := range strings.Split(v, ",") {
				p = strings.TrimSpace(p)
				switch {
				case p == wsProtocol:
					offered = true
				case strings.HasPrefix(p, wsCSRFPrefix):
					csrf = strings.TrimPrefix(p, wsCSRFPrefix)
				}
			}
		}
		if !offered {
			csrf = ""
		}
	}
	p, ok := c.signedIn(r, csrf)
	if !ok {
		c.notSignedIn(w, r, csrf, upgrade)
		return
	}
	ctx := context.WithValue(r.Context(), consolePeerKey{}, p)
	if upgrade {
		// The socket outlives this request: it closes when the sign-in
		// ends (console_ends.go).
		cl, _ := c.claims(r)
		ctx = withConnEnd(ctx, c.ends.of(cl, c.now()))
		if c.signOuts.has(cl.id) { // signed out since the check above
			c.ends.end(cl.id)
		}
	}
	r.Header.Del("Authorization")
	q := r.URL.Query()
	if q.Has("token") {
		q.Del("token")
		r.URL.RawQuery = q.Encode()
	}
	if upgrade {
		r.Header.Del("Sec-WebSocket-Protocol")
		w.Header().Set("Sec-WebSocket-Protocol", wsProtocol)
	}
	c.opts.Server.ServeHTTP(w, r.WithContext(ctx))
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
