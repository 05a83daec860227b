package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// Operation names in CapabilityErrors.
const (
	opSetup      = "setup"
	opOpen       = "open"
	opNavigate   = "navigate"
	opText       = "text"
	opEvaluate   = "evaluate"
	opScreenshot = "screenshot"
)

// Page is one browser tab: the page handle ([handle.Page]) for one call.
// Its methods run one at a time (a tab does one thing at a time); Close
// closes the tab and its browser context.
type Page struct {
	p *Provider
	// ctx is chromedp's handle on the tab, not a request context.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closeOnce sync.Once
}

var _ handle.Page = (*Page)(nil)

// Navigate loads rawURL and waits for the load event. Only http and https
// URLs the grants allow are loaded (not file:, data:, javascript:, chrome:
// or about:); every request the page then makes goes through the proxy and
// the same rules. Errors: invalid_argument (not an absolute URL), denied
// (the URL, a redirect or its address is not allowed), not_found (the host
// does not resolve), unavailable (the page did not load), timeout,
// cancelled. A page that loads with a 4xx or 5xx status is not an error.
func (pg *Page) Navigate(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return handle.Errorf(handle.KindPage, opNavigate, protocol.CodeInvalidArgument, "%q is not an absolute URL", rawURL)
	}
	if err := pg.p.policy.CheckURL(u); err != nil {
		return &handle.CapabilityError{Handle: handle.KindPage, Op: opNavigate, Code: protocol.CodeDenied, Message: err.Error(), Err: err}
	}
	resp, err := run(ctx, pg, opNavigate, chromedp.NavigateResponse(u.String()))
	if err != nil {
		var le *chromedp.LoadError
		if errors.As(err, &le) {
			return pg.loadError(u, le)
		}
		return err
	}
	// The proxy answered instead of the server (the request or a redirect
	// was refused): report its refusal. Only a plain http response passed
	// through the proxy's hands, which strip these headers from servers;
	// an https response came through a tunnel, and its headers are the
	// server's.
	if resp != nil && strings.HasPrefix(resp.URL, "http:") {
		if code, msg := proxyHeaders(resp.Headers); code != "" {
			return handle.Errorf(handle.KindPage, opNavigate, code, "%s", msg)
		}
	}
	return nil
}

// loadError maps a page that did not load. A refused CONNECT tunnel (https)
// shows in Chromium only as ERR_TUNNEL_CONNECTION_FAILED; the proxy's
// record for the host says why.
func (pg *Page) loadError(u *url.URL, le *chromedp.LoadError) error {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	if strings.Contains(le.ErrorText, "TUNNEL_CONNECTION_FAILED") {
		if f, ok := pg.p.proxy.lastFailure(net.JoinHostPort(strings.ToLower(u.Hostname()), port)); ok {
			return &handle.CapabilityError{Handle: handle.KindPage, Op: opNavigate, Code: f.code, Message: f.msg, Err: le}
		}
	}
	return &handle.CapabilityError{Handle: handle.KindPage, Op: opNavigate, Code: protocol.CodeUnavailable,
		Message: fmt.Sprintf("the page did not load: %s", le.ErrorText), Err: le}
}

// Text returns the rendered text (innerText) of the first element matching
// the CSS selector, or of the body when selector is "". Errors: not_found
// (nothing matches), invalid_argument (the selector is not valid CSS),
// too_large (more than max_response_bytes), timeout, cancelled.
func (pg *Page) Text(ctx context.Context, selector string) (string, error) {
	sel, _ := json.Marshal(selector)
	// Why JavaScript and not chromedp.Text: a query waits for the element
	// to appear, so a selector that matches nothing would end in a
	// timeout rather than not_found. The size is checked in the page, and
	// first without layout: innerText lays the page out, which for 20 MiB
	// of text takes Chromium longer than any timeout (the call ended
	// timeout), so a text content over the limit — scripts and styles not
	// counted — is refused before innerText is asked for; then a text over
	// the limit is never sent. A string of n UTF-16 units is at least n
	// bytes of UTF-8 and at most 3n, so the exact count is made only when
	// it may matter.
	expr := fmt.Sprintf(`(() => {
		const s = %s, max = %d;
		const e = s === "" ? document.body : document.querySelector(s);
		if (!e) return null;
		let c = e.textContent.length;
		for (const x of e.querySelectorAll("script,style,noscript,template")) c -= x.textContent.length;
		if (c > max) return {n: c, atLeast: true, content: true};
		const t = e.innerText;
		if (t.length > max) return {n: t.length, atLeast: true};
		if (t.length * 3 > max) { const n = new TextEncoder().encode(t).length; if (n > max) return {n: n}; }
		return {t: t};
	})()`, sel, pg.p.grants.MaxResponseBytes)
	type answer struct {
		T       *string `json:"t"`
		N       int64   `json:"n"`
		AtLeast bool    `json:"atLeast"`
		Content bool    `json:"content"` // counted from textContent, before any layout
	}
	a, err := run(ctx, pg, opText, chromedp.Evaluate[*answer](expr))
	if err != nil {
		return "", err
	}
	switch {
	case a == nil && selector == "":
		return "", handle.Errorf(handle.KindPage, opText, protocol.CodeNotFound, "the page has no body")
	case a == nil:
		return "", handle.Errorf(handle.KindPage, opText, protocol.CodeNotFound, "no element matches %q", selector)
	case a.T == nil && a.Content:
		return "", handle.Errorf(handle.KindPage, opText, protocol.CodeTooLarge, "the element's text content has %d characters (scripts and styles aside), more than %d bytes (max_response_bytes): name a smaller part with a selector", a.N, pg.p.grants.MaxResponseBytes)
	case a.T == nil && a.AtLeast:
		return "", handle.Errorf(handle.KindPage, opText, protocol.CodeTooLarge, "the text has at least %d bytes, more than %d (max_response_bytes)", a.N, pg.p.grants.MaxResponseBytes)
	case a.T == nil:
		return "", handle.Errorf(handle.KindPage, opText, protocol.CodeTooLarge, "the text has %d bytes, more than %d (max_response_bytes)", a.N, pg.p.grants.MaxResponseBytes)
	case int64(len(*a.T)) > pg.p.grants.MaxResponseBytes: // the page's count is the page's: check ours too
		return "", handle.Errorf(handle.KindPage, opText, protocol.CodeTooLarge, "the text has %d bytes, more than %d (max_response_bytes)", len(*a.T), pg.p.grants.MaxResponseBytes)
	}
	return *a.T, nil
}

// Evaluate runs a JavaScript expression in the page and returns its value as
// JSON; a promise is awaited, undefined is null. Errors: invalid_argument
// (the expression threw; the message is the exception's), too_large (more
// than max_response_bytes), timeout, cancelled.
func (pg *Page) Evaluate(ctx context.Context, expression string) (json.RawMessage, error) {
	v, err := run(ctx, pg, opEvaluate, chromedp.Evaluate[[]byte](expression, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return json.RawMessage("null"), nil
	}
	if int64(len(v)) > pg.p.grants.MaxResponseBytes {
		return nil, handle.Errorf(handle.KindPage, opEvaluate, protocol.CodeTooLarge, "the value has %d bytes of JSON, more than %d (max_response_bytes)", len(v), pg.p.grants.MaxResponseBytes)
	}
	return json.RawMessage(v), nil
}

// Screenshot returns a PNG of the viewport. Errors: too_large (more than
// max_screenshot_bytes), timeout, cancelled.
func (pg *Page) Screenshot(ctx context.Context) ([]byte, error) {
	png, err := run(ctx, pg, opScreenshot, chromedp.CaptureScreenshot())
	if err != nil {
		return nil, err
	}
	if int64(len(png)) > pg.p.grants.MaxScreenshotBytes {
		return nil, handle.Errorf(handle.KindPage, opScreenshot, protocol.CodeTooLarge, "the screenshot has %d bytes, more than %d (max_screenshot_bytes)", len(png), pg.p.grants.MaxScreenshotBytes)
	}
	return png, nil
}

// Close closes the tab and its browser context. It is safe to call more than
// once.
func (pg *Page) Close() error {
	pg.closeOnce.Do(pg.cancel)
	return nil
}

// run runs a on the tab, bounded by ctx and the grant's timeout, and maps
// its failure to a CapabilityError for op. A *chromedp.LoadError is
// returned as is, for Navigate.
func run[T any](ctx context.Context, pg *Page, op string, a chromedp.Action[T]) (T, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	var zero T
	if ce := handle.FromContext(ctx, handle.KindPage, op); ce != nil {
		return zero, ce
	}
	// Why derive from the tab's context: chromedp finds the tab in it. ctx
	// is joined with AfterFunc.
	opCtx, cancel := context.WithTimeout(pg.ctx, pg.p.grants.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	v, err := chromedp.Run(opCtx, a)
	if err == nil {
		return v, nil
	}
	if ce := handle.FromContext(ctx, handle.KindPage, op); ce != nil {
		ce.Err = err
		return zero, ce
	}
	if errors.Is(opCtx.Err(), context.DeadlineExceeded) {
		return zero, &handle.CapabilityError{Handle: handle.KindPage, Op: op, Code: protocol.CodeTimeout,
			Message: fmt.Sprintf("the page did not finish within %s (timeout)", pg.p.grants.Timeout), Err: err}
	}
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		return zero, err
	}
	var ee *chromedp.ExceptionError
	if errors.As(err, &ee) {
		return zero, &handle.CapabilityError{Handle: handle.KindPage, Op: op, Code: protocol.CodeInvalidArgument,
			Message: "the script threw: " + exceptionText(ee), Err: err}
	}
	if pg.ctx.Err() != nil {
		return zero, &handle.CapabilityError{Handle: handle.KindPage, Op: op, Code: protocol.CodeUnavailable,
			Message: "the tab is closed", Err: err}
	}
	return zero, &handle.CapabilityError{Handle: handle.KindPage, Op: op, Code: protocol.CodeUnavailable,
		Message: "the browser failed", Err: err}
}

// exceptionText is the message of a JavaScript exception, without the
// protocol's line and column noise when a description is there.
func exceptionText(ee *chromedp.ExceptionError) string {
	if ee.Exception != nil && ee.Exception.Description != "" {
		d := ee.Exception.Description
		if i := strings.Index(d, "\n    at "); i >= 0 {
			d = d[:i] // drop the stack
		}
		return d
	}
	return ee.Text
}

// proxyHeaders returns the code and message the proxy set on its own
// response, or "".
func proxyHeaders(h network.Headers) (protocol.Code, string) {
	var code, msg string
	for k, v := range h {
		s, _ := v.(string)
		switch {
		case strings.EqualFold(k, headerCode):
			code = s
		case strings.EqualFold(k, headerMessage):
			msg = s
		}
	}
	if code == "" {
		return "", ""
	}
	return protocol.Code(code), msg
}
