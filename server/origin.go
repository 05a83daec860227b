package server

import (
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/cors"

	"github.com/brainrt/brain/internal/textcut"
)

// forwardedHostHeader carries, on a request another node forwards, the Host
// its client reached (cluster.go): the host a browser's Origin is checked
// against. Without it the owner compared the Origin with its own address,
// and refused a browser's same-origin WebSocket that reached another node.
// A client could send the header itself; the check is for browsers, whose
// WebSocket handshakes carry no header a page chose, and every request
// needs its token anyway.
const forwardedHostHeader = "Brain-Forwarded-Host"

// clientHost is the host the request's client reached: when another node
// forwarded it, the one that node was reached at; behind a reverse proxy
// that says so (X-Forwarded-Host: nginx's default and Go's ReverseProxy
// rewrite Host to brain's own address), the proxy's; else the request's
// own Host. A page's same-origin WebSocket behind such a proxy was
// refused 403 (its Origin is the proxy's). Taking the header from anyone
// opens nothing to a browser page: a WebSocket handshake carries no
// header a page chose, and a fetch that sets it asks first (a preflight),
// which only a listed site's page passes.
func clientHost(r *http.Request) string {
	if r.Header.Get(forwardedHeader) != "" {
		if h := r.Header.Get(forwardedHostHeader); h != "" {
			return h
		}
	}
	if h := r.Header.Get("X-Forwarded-Host"); h != "" {
		if i := strings.IndexByte(h, ','); i >= 0 { // proxies in a row: the first was reached by the client
			h = h[:i]
		}
		if h = strings.TrimSpace(h); h != "" {
			return h
		}
	}
	return r.Host
}

// crossOrigin applies to a request the rule coder/websocket's Accept
// applies to a WebSocket handshake, so that the MCP endpoint and the
// WebSocket agree on which browser pages may use them (the MCP transport
// requires servers to check Origin): a request without Origin (any client
// but a browser) passes, as does one whose Origin's host is the host the
// client reached, or matches one of patterns (path.Match, case folded;
// a pattern with "://" is matched against scheme://host). It returns why a
// request is refused, or "".
func crossOrigin(r *http.Request, patterns []string) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return "the Origin header " + strconv.Quote(textcut.Cut(origin, 200)) + " is not a URL with a host"
	}
	host := clientHost(r)
	if strings.EqualFold(u.Host, host) || originMatches(u, patterns) {
		return ""
	}
	why := "the Origin header " + strconv.Quote(textcut.Cut(origin, 200)) + " is another site than " + host + ": a browser page may use this endpoint from its own origin"
	if len(patterns) == 0 {
		return why + " only (a kernel lets pages of other sites in by listing their origins: browser_origins, docs/serve.md)"
	}
	return why + " or one the kernel lists (browser_origins), and this one is not listed"
}

// sameOrListedOrigin applies crossOrigin to r: a request it refuses is
// answered 403 saying why, logged (originRefused), and reported false.
func (srv *Server) sameOrListedOrigin(w http.ResponseWriter, r *http.Request) bool {
	why := crossOrigin(r, srv.opts.OriginPatterns)
	if why == "" {
		return true
	}
	srv.originRefused(r, r.Header.Get("Origin"))
	httpError(w, http.StatusForbidden, "forbidden", why)
	return false
}

// originMatches reports whether origin u matches one of patterns, as
// coder/websocket matches its OriginPatterns: path.Match, case folded,
// against the host, or against scheme://host for a pattern with "://".
func originMatches(u *url.URL, patterns []string) bool {
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}

// newCORS answers the browsers' CORS requests for the pages of other
// sites that patterns let in (Options.OriginPatterns): a page's fetch of
// the API or the MCP endpoint sends Authorization, so the browser asks
// first (a preflight) and reads the answer only if told it may. Tokens
// are never cookies, so credentials are not allowed: a page sends the
// token it holds, and no page rides on one the browser keeps. nil when
// there are no patterns (same-origin pages need no CORS).
func (srv *Server) newCORS(patterns []string) *cors.Cors {
	if len(patterns) == 0 {
		return nil
	}
	return cors.New(cors.Options{
		AllowOriginVaryRequestFunc: func(r *http.Request, origin string) (bool, []string) {
			u, err := url.Parse(origin)
			if err == nil && u.Host != "" && originMatches(u, patterns) {
				return true, nil
			}
			srv.originRefused(r, origin)
			return false, nil
		},
		AllowedMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete},
		// Any header a listed site's page sends: browsers' tracing and
		// error-reporting libraries add their own (traceparent,
		// sentry-trace, baggage) to every fetch, and a preflight refused
		// for one looks, in the browser, like a refused origin. The
		// answer names the headers asked for (Authorization among them,
		// which a bare * would not cover).
		AllowedHeaders: []string{"*"},
		// What a page's script must read: the MCP session, and why a
		// request was refused or should wait.
		ExposedHeaders: []string{"Mcp-Session-Id", "Retry-After", "Www-Authenticate"},
		MaxAge:         600, // seconds a browser keeps a preflight's answer
		// A listed site's page on the public internet may reach a kernel on
		// loopback or a private network: Chromium asks for this answer
		// (Private Network Access) before it sends such a request.
		AllowPrivateNetwork: true,
	})
}

// originRefusedEvery is the window of the refused Origins' log, and
// originsLoggedPerWindow how many distinct ones a window logs: each
// Origin once a window, and past the cap only a count, said as the next
// window begins. Anyone may send any Origin, token or not: a line and a
// record for each of 20,000 made-up ones flooded the log and grew memory
// that was never given back (a re-probe).
const (
	originRefusedEvery     = time.Minute
	originsLoggedPerWindow = 32
)

// refusedOrigins is what the log of refused Origins remembers: the
// current window's.
type refusedOrigins struct {
	mu         sync.Mutex
	start      time.Time
	logged     map[string]bool
	suppressed int
}

// originRefused logs, once a window for each Origin and for at most
// originsLoggedPerWindow of them, that a browser page of another site
// was refused: a browser hides the refusal from the page's scripts (a
// failed preflight, a WebSocket closed 1006), so the kernel's log is
// where its operator learns which site to list.
func (srv *Server) originRefused(r *http.Request, origin string) {
	origin = textcut.Cut(origin, 200)
	ro := &srv.originsRefused
	now := time.Now()
	ro.mu.Lock()
	var dropped int
	if ro.logged == nil || now.Sub(ro.start) >= originRefusedEvery {
		dropped = ro.suppressed
		ro.start, ro.logged, ro.suppressed = now, map[string]bool{}, 0
	}
	logIt := !ro.logged[origin] && len(ro.logged) < originsLoggedPerWindow
	switch {
	case logIt:
		ro.logged[origin] = true
	case !ro.logged[origin]:
		ro.suppressed++
	}
	ro.mu.Unlock()
	if dropped > 0 {
		srv.log.Info("browser pages of other sites refused in the last window beyond those logged", slog.Int("refusals", dropped))
	}
	if logIt {
		srv.log.Info("a browser page of another site was refused: list its origin under browser_origins to let it in (docs/serve.md)",
			slog.String("origin", origin), slog.String("path", r.URL.Path), slog.String("host", clientHost(r)))
	}
}
