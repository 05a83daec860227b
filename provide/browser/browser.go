package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
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

// proxyAddr is where the proxy listens inside Chromium's network
// namespace, which is new and empty: any port is free there.
const proxyAddr = "127.0.0.1:3128"

// Options configures [New]. A nil *Options means defaults.
type Options struct {
	// Logger receives a record for each denied request. Nil discards.
	Logger *slog.Logger
	// Resolver resolves host names for the proxy. Nil means
	// net.DefaultResolver. Chromium resolves nothing itself.
	Resolver fetch.Resolver

	// For tests (export_test.go): observe sees every request the proxy
	// receives; shareNetwork starts Chromium in brain's own network
	// namespace, as before isolation, to show what isolation stops.
	observe      func(request string)
	shareNetwork bool
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
	// proxyURL is the proxy as Chromium reaches it.
	proxyURL string
	netns    string // Chromium's network namespace, "net:[…]"

	// The chromedp contexts are chromedp's handles on the browser, not
	// request contexts: the browser lives as long as they do.
	allocCancel   context.CancelFunc
	browserCtx    context.Context
	browserCancel context.CancelFunc

	closeOnce sync.Once
	mu        sync.Mutex
	closed    bool
}

// New validates g, starts Chromium in a network namespace of its own and
// the proxy listening inside it, and returns the Provider. ctx bounds the
// start only. Errors: a *grant.FieldError for invalid grants; a
// *handle.CapabilityError with code unavailable when the Chromium binary is
// missing or does not start (so a missing browser shows at setup, never at
// the first call), or when Chromium cannot be confined to the proxy (not
// Linux, or no CAP_SYS_ADMIN: the page handle never runs unconfined);
// cancelled or timeout when ctx ends first.
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
	if !opts.shareNetwork {
		if err := checkIsolation(); err != nil {
			return nil, unavailable("cannot confine Chromium to the page proxy: "+err.Error()+
				" (the page handle starts Chromium in a network namespace of its own, whose only way out is the proxy; that needs Linux and CAP_SYS_ADMIN, which root has)", err)
		}
	}
	tmp, err := os.MkdirTemp("", "brain-browser-")
	if err != nil {
		return nil, unavailable("cannot create the browser's temporary directory", err)
	}
	p := &Provider{grants: g, policy: policy, logger: logger, tmpDir: tmp}

	proxyURL := "http://" + proxyAddr
	var shared net.Listener
	if opts.shareNetwork {
		if shared, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			p.shutdown()
			return nil, unavailable("cannot start the page proxy", err)
		}
		proxyURL = "http://" + shared.Addr().String()
	}
	p.proxyURL = proxyURL
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(g.Binary),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		// Chromium's own background requests (component and extension
		// updates, safe browsing, sync, field trials, metrics, hints) are
		// turned off, not merely refused by the proxy: none is made.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-component-extensions-with-background-pages", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-field-trial-config", true),
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,OptimizationHints,OptimizationGuideModelDownloading,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,NetworkTimeServiceQuerying,SafeBrowsingBetterTelemetryAcrossReports,PreconnectToSearch,SearchPrefetchServicePrefetching,NavigationPredictor,Prerender2,LoadingPredictorUseLocalPredictions,PrivacySandboxSettings4,PushMessaging,AimEligibilityService,AimServerEligibilityEnabled,AimServerRequestOnStartupEnabled,AimEnabled,AiModeOmniboxEntryPoint"),
		chromedp.Flag("dns-prefetch-disable", true),
		// Google Cloud Messaging checks in at start whatever the flags
		// above say; port 1 is one Chromium refuses to connect to, so
		// these URLs fail inside Chromium, before the proxy.
		chromedp.Flag("gcm-checkin-url", "https://127.0.0.1:1/checkin"),
		chromedp.Flag("gcm-registration-url", "https://127.0.0.1:1/register"),
		chromedp.Flag("gcm-mcs-endpoint", "https://127.0.0.1:1/"),
		// Components installed on demand (Chromium 156 asks for the
		// "Optimization Guide On Device Models Manifest" at start) check
		// for updates whatever --disable-component-update says; the
		// updater's URL is sent to the same refused port.
		chromedp.Flag("component-updater", "url-source=https://127.0.0.1:1/update"),
		// Every request goes through the proxy; "<-loopback>" removes the
		// implicit bypass of localhost and 127.0.0.1, so loopback is
		// checked like any other address. (In Chromium's namespace, the
		// loopback holds nothing but the proxy anyway.)
		chromedp.ProxyServer(proxyURL),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// Defence in depth only: the namespace is what stops UDP.
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		// Chromium needs no name resolution of its own: the proxy
		// resolves.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		// The browser gets none of brain's environment (secrets, proxy
		// variables), and its own HOME and TMPDIR.
		chromedp.NoInheritEnv,
		chromedp.Env("HOME="+tmp, "TMPDIR="+tmp, "PATH=/usr/bin:/bin"),
	)
	if !opts.shareNetwork {
		allocOpts = append(allocOpts, chromedp.ModifyCmdFunc(isolate))
	}
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
		if shared != nil {
			shared.Close()
		}
		if ce := handle.FromContext(ctx, handle.KindPage, opSetup); ce != nil {
			return nil, ce
		}
		msg := fmt.Sprintf("Chromium at %s did not start", g.Binary)
		if errors.Is(err, syscall.EPERM) {
			msg += " in a network namespace of its own (that needs CAP_SYS_ADMIN)"
		}
		return nil, unavailable(msg, err)
	}
	ln := shared
	if ln == nil {
		var pid int
		if b := chromedp.FromContext(browserCtx).Browser; b != nil && b.Process() != nil {
			pid = b.Process().Pid
		}
		if ln, p.netns, err = listenIn(pid, proxyAddr); err != nil {
			p.shutdown()
			return nil, unavailable("cannot confine Chromium to the page proxy", err)
		}
	}
	p.proxy = startProxy(ln, policy, g.Timeout, logger, opts.observe)
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

	proxyURL := p.proxyURL
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
		// Whatever chromedp missed: every process in Chromium's
		// namespace is Chromium's.
		killNamespace(p.netns)
		if p.proxy != nil {
			p.proxy.close()
		}
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
