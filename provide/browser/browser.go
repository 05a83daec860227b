package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fetch"
)

// Log attribute keys.
const (
	logKeyTarget = "target"
	logKeyRule   = "rule"
	logKeyAddr   = "addr"
)

// closeTimeout bounds a graceful browser shutdown before it is killed.
const closeTimeout = 5 * time.Second

// Options configures [New]. A nil *Options means defaults.
type Options struct {
	// Logger receives a record for each denied request. Nil discards.
	Logger *slog.Logger
	// Resolver resolves host names for the proxy. Nil means
	// net.DefaultResolver. Chromium resolves nothing itself.
	Resolver fetch.Resolver
}

// Provider is the page handle's provider: one headless Chromium, started by
// [New], and an HTTP proxy in front of it that enforces the grants. Each
// [Provider.Open] gives a fresh tab in its own browser context (no cookies,
// storage or cache shared with other tabs). A Provider is safe for
// concurrent use; Close stops the browser.
type Provider struct {
	grants Grants
	policy *fetch.Policy
	proxy  *proxy
	logger *slog.Logger
	tmpDir string

	// The chromedp contexts are chromedp's handles on the browser, not
	// request contexts: the browser lives as long as they do.
	allocCancel   context.CancelFunc
	browserCtx    context.Context
	browserCancel context.CancelFunc

	closeOnce sync.Once
	mu        sync.Mutex
	closed    bool
}

// New validates g, starts the proxy and Chromium, and returns the Provider.
// ctx bounds the start only. Errors: a *grant.FieldError for invalid
// grants; a *handle.CapabilityError with code unavailable when the Chromium
// binary is missing or does not start (so a missing browser shows at setup,
// never at the first call); cancelled or timeout when ctx ends first.
func New(ctx context.Context, g Grants, opts *Options) (*Provider, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	g = g.withDefaults()
	if opts == nil {
		opts = &Options{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkBinary(g.Binary); err != nil {
		return nil, err
	}
	policy, err := fetch.NewPolicy(g.Grants, &fetch.Options{Resolver: opts.Resolver})
	if err != nil {
		return nil, err
	}
	px, err := startProxy(policy, g.Timeout, logger)
	if err != nil {
		return nil, unavailable("cannot start the page proxy", err)
	}
	tmp, err := os.MkdirTemp("", "brain-browser-")
	if err != nil {
		px.close()
		return nil, unavailable("cannot create the browser's temporary directory", err)
	}
	p := &Provider{grants: g, policy: policy, proxy: px, logger: logger, tmpDir: tmp}

	proxyURL := "http://" + px.addr()
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(g.Binary),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Every request goes through the proxy; "<-loopback>" removes the
		// implicit bypass of localhost and 127.0.0.1, so loopback is
		// checked like any other address.
		chromedp.ProxyServer(proxyURL),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// WebRTC would send UDP straight from the browser, past the proxy.
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		// Chromium needs no name resolution of its own: the proxy
		// resolves. Refusing it stops any lookup that bypasses the proxy.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		// The browser gets none of brain's environment (secrets, proxy
		// variables), and its own HOME and TMPDIR.
		chromedp.NoInheritEnv,
		chromedp.Env("HOME="+tmp, "TMPDIR="+tmp, "PATH=/usr/bin:/bin"),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	// chromedp logs with the log package by default; libraries never
	// print, so its messages go to the logger at debug level.
	logf := func(format string, args ...any) { logger.Debug("chromedp: " + fmt.Sprintf(format, args...)) }
	browserCtx, browserCancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	p.allocCancel, p.browserCtx, p.browserCancel = allocCancel, browserCtx, browserCancel

	// Why not a derived context: the context of chromedp's first call
	// owns the browser process. ctx may only stop the start.
	stop := context.AfterFunc(ctx, browserCancel)
	err = chromedp.Do(browserCtx)
	stopped := !stop()
	if err != nil || stopped {
		p.shutdown()
		if ce := handle.FromContext(ctx, handle.KindPage, opSetup); ce != nil {
			return nil, ce
		}
		return nil, unavailable(fmt.Sprintf("Chromium at %s did not start", g.Binary), err)
	}
	return p, nil
}

// Open opens a tab for one call; the caller must Close the returned Page.
// ctx bounds the opening only. Errors are *handle.CapabilityError:
// unavailable when the provider is closed or the browser is gone, timeout or
// cancelled when ctx ends first.
func (p *Provider) Open(ctx context.Context) (*Page, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, handle.Errorf(handle.KindPage, opOpen, protocol.CodeUnavailable, "the browser is closed")
	}

	proxyURL := "http://" + p.proxy.addr()
	tabCtx, tabCancel := chromedp.NewContext(p.browserCtx,
		// A browser context per tab: no cookies, storage or cache cross
		// from one call to the next. Its proxy is set again explicitly,
		// so that it never depends on what a new context inherits.
		chromedp.WithNewBrowserContext(func(params *target.CreateBrowserContextParams) {
			params.ProxyServer = proxyURL
			params.ProxyBypassList = "<-loopback>"
		}),
	)
	// As in New: the first call's context owns the tab; ctx may only stop
	// the opening.
	stop := context.AfterFunc(ctx, tabCancel)
	err := chromedp.Do(tabCtx)
	if err == nil {
		// A page must not write files: refuse downloads.
		_, err = chromedp.CallBrowser(tabCtx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior:         cdpbrowser.SetDownloadBehaviorBehaviorDeny,
			BrowserContextID: chromedp.FromContext(tabCtx).BrowserContextID,
		})
	}
	stopped := !stop()
	if err != nil || stopped {
		tabCancel()
		if ce := handle.FromContext(ctx, handle.KindPage, opOpen); ce != nil {
			return nil, ce
		}
		return nil, &handle.CapabilityError{Handle: handle.KindPage, Op: opOpen, Code: protocol.CodeUnavailable,
			Message: "cannot open a browser tab", Err: err}
	}
	return &Page{p: p, ctx: tabCtx, cancel: tabCancel}, nil
}

// Close stops the browser and the proxy. Pages still open stop working
// (their operations fail with unavailable); closing them stays safe. Close
// is safe to call more than once.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.shutdown()
	return nil
}

// shutdown stops the browser, then the proxy, and removes the temporary
// directory.
func (p *Provider) shutdown() {
	p.closeOnce.Do(func() {
		if p.browserCancel != nil {
			ctx, cancel := context.WithTimeout(p.browserCtx, closeTimeout)
			_ = chromedp.Cancel(ctx) // graceful; the cancels below kill
			cancel()
			p.browserCancel()
			// Waits for the process to exit; chromedp then kills any child
			// left and removes its user data directory.
			p.allocCancel()
		}
		p.proxy.close()
		_ = os.RemoveAll(p.tmpDir)
	})
}

// checkBinary reports a missing or unusable Chromium as unavailable.
func checkBinary(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return unavailable(fmt.Sprintf("Chromium is not installed at %s (install the Debian package \"chromium\", or set binary)", path), err)
	case err != nil:
		return unavailable(fmt.Sprintf("cannot use Chromium at %s", path), err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return unavailable(fmt.Sprintf("%s is not an executable file", path), nil)
	}
	return nil
}

func unavailable(msg string, err error) *handle.CapabilityError {
	return &handle.CapabilityError{Handle: handle.KindPage, Op: opSetup, Code: protocol.CodeUnavailable, Message: msg, Err: err}
}
