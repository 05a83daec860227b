package fetch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// Log attribute keys.
const (
	logKeyURL  = "url"
	logKeyRule = "rule"
	logKeyAddr = "addr"
)

const opFetch = "fetch"

// Fetcher is the net handle: it implements [handle.Net] under [Grants]. It
// keeps connections alive between calls and is safe for concurrent use.
// Close releases its idle connections.
type Fetcher struct {
	policy       *Policy
	client       *http.Client
	transport    *http.Transport
	maxBody      int64
	timeout      time.Duration
	maxRedirects int
	logger       *slog.Logger
}

var _ handle.Net = (*Fetcher)(nil)

// New validates g and returns a Fetcher enforcing it. Errors from
// validation are *[grant.FieldError]. opts may be nil.
func New(g Grants, opts *Options) (*Fetcher, error) {
	p, err := NewPolicy(g, opts)
	if err != nil {
		return nil, err
	}
	g = g.withDefaults()
	f := &Fetcher{
		policy:       p,
		maxBody:      g.MaxResponseBytes,
		timeout:      g.Timeout,
		maxRedirects: g.MaxRedirects,
		logger:       slog.New(slog.DiscardHandler),
	}
	if opts != nil && opts.Logger != nil {
		f.logger = opts.Logger
	}
	f.transport = &http.Transport{
		// Why nil: HTTP_PROXY and friends would send requests to a host
		// the grants never named, and the proxy would dial addresses we
		// never checked.
		Proxy:                  nil,
		DialContext:            p.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	f.client = &http.Client{Transport: f.transport, CheckRedirect: f.checkRedirect}
	return f, nil
}

// Policy returns the compiled grants f enforces.
func (f *Fetcher) Policy() *Policy { return f.policy }

// Close closes idle connections. Requests in flight are not interrupted;
// f stays usable.
func (f *Fetcher) Close() error {
	f.transport.CloseIdleConnections()
	return nil
}

// Fetch sends req and returns the whole response. A 4xx or 5xx status is
// not an error. Errors are *handle.CapabilityError with code:
//   - invalid_argument: the URL is not absolute, or the method or a header
//     is malformed;
//   - denied: a scheme, host, port or address the grants do not allow, in
//     the request or any redirect, or too many redirects (the cause is a
//     *[DeniedError]);
//   - too_large: the body is longer than max_response_bytes;
//   - timeout: the grant's timeout or ctx's deadline passed;
//   - cancelled: ctx was cancelled;
//   - not_found: the host name does not resolve;
//   - unavailable: the connection or the exchange failed.
func (f *Fetcher) Fetch(ctx context.Context, req handle.Request) (handle.Response, error) {
	if ce := handle.FromContext(ctx, handle.KindNet, opFetch); ce != nil {
		return handle.Response{}, ce
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return handle.Response{}, invalid("the URL does not parse: %v", err)
	}
	if !u.IsAbs() || u.Host == "" {
		// A scheme the grant does not allow (file:///etc/passwd has no
		// host) is what is wrong with it, not the missing host.
		var de *DeniedError
		if err := f.policy.CheckURL(u); u.Scheme != "" && errors.As(err, &de) && de.Rule == "schemes" {
			return handle.Response{}, f.fail(ctx, ctx, u, err)
		}
		return handle.Response{}, invalid("the URL %q is not absolute: give a scheme and a host", u.Redacted())
	}
	if err := f.policy.CheckURL(u); err != nil {
		return handle.Response{}, f.fail(ctx, ctx, u, err)
	}
	for name, values := range req.Header {
		if !httpguts.ValidHeaderFieldName(name) {
			return handle.Response{}, invalid("header name %q is not valid", name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return handle.Response{}, invalid("header %q has a value that is not valid", name)
			}
		}
	}

	reqCtx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(reqCtx, method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return handle.Response{}, invalid("the request cannot be made: %v", err)
	}
	for name, values := range req.Header {
		for _, v := range values {
			hreq.Header.Add(name, v)
		}
	}

	resp, err := f.client.Do(hreq)
	if err != nil {
		return handle.Response{}, f.fail(ctx, reqCtx, u, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > f.maxBody {
		return handle.Response{}, f.tooLarge(resp.ContentLength)
	}
	// Why +1: reading one byte past the cap tells a body of exactly
	// maxBody bytes from a longer one.
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBody+1))
	if err != nil {
		return handle.Response{}, f.fail(ctx, reqCtx, u, fmt.Errorf("read body: %w", err))
	}
	if int64(len(body)) > f.maxBody {
		return handle.Response{}, f.tooLarge(-1)
	}
	return handle.Response{
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   body,
		URL:    resp.Request.URL.String(),
	}, nil
}

// checkRedirect applies the grants to every redirect, as the first request.
// The dialer checks the addresses.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if f.maxRedirects < 0 {
		return http.ErrUseLastResponse
	}
	if len(via) > f.maxRedirects {
		return &DeniedError{Rule: "max_redirects", Msg: fmt.Sprintf("more than %d redirects (max_redirects)", f.maxRedirects)}
	}
	return f.policy.CheckURL(req.URL)
}

// fail turns an error from the request into a CapabilityError. ctx is the
// caller's context, reqCtx the one bounded by the grant's timeout.
func (f *Fetcher) fail(ctx, reqCtx context.Context, u *url.URL, err error) *handle.CapabilityError {
	var de *DeniedError
	if errors.As(err, &de) {
		attrs := []any{logKeyURL, u.Redacted(), logKeyRule, de.Rule}
		if de.Addr.IsValid() {
			attrs = append(attrs, logKeyAddr, de.Addr.String())
		}
		f.logger.Info("net request denied", attrs...)
		return &handle.CapabilityError{Handle: handle.KindNet, Op: opFetch, Code: protocol.CodeDenied, Message: de.Msg, Err: err}
	}
	if ce := handle.FromContext(ctx, handle.KindNet, opFetch); ce != nil {
		ce.Err = err
		return ce
	}
	var ne net.Error
	if reqCtx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return &handle.CapabilityError{Handle: handle.KindNet, Op: opFetch, Code: protocol.CodeTimeout,
			Message: fmt.Sprintf("no complete response from %s within %s (timeout)", u.Host, f.timeout), Err: err}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return &handle.CapabilityError{Handle: handle.KindNet, Op: opFetch, Code: protocol.CodeNotFound,
			Message: fmt.Sprintf("host %q does not resolve", u.Hostname()), Err: err}
	}
	reason := "the connection or the exchange failed"
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "the connection was refused"
	case errors.As(err, &certErr):
		reason = "the server's TLS certificate was not accepted"
	}
	return &handle.CapabilityError{Handle: handle.KindNet, Op: opFetch, Code: protocol.CodeUnavailable,
		Message: fmt.Sprintf("request to %s failed: %s", u.Host, reason), Err: err}
}

func (f *Fetcher) tooLarge(length int64) *handle.CapabilityError {
	msg := fmt.Sprintf("the response body is longer than %d bytes (max_response_bytes)", f.maxBody)
	if length >= 0 {
		msg = fmt.Sprintf("the response body has %d bytes, more than %d (max_response_bytes)", length, f.maxBody)
	}
	return &handle.CapabilityError{Handle: handle.KindNet, Op: opFetch, Code: protocol.CodeTooLarge, Message: msg}
}

func invalid(format string, args ...any) *handle.CapabilityError {
	return handle.Errorf(handle.KindNet, opFetch, protocol.CodeInvalidArgument, format, args...)
}
