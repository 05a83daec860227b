package browser

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fetch"
)

// Headers the proxy sets on the answers it makes itself, so that Navigate
// can tell a refusal from a page. The proxy removes them from every
// upstream response: a server cannot forge them.
const (
	headerCode    = "X-Brain-Code"
	headerMessage = "X-Brain-Message"
)

// maxFailures bounds the table of recent tunnel failures.
const maxFailures = 256

// proxy is the HTTP proxy Chromium sends every request through: plain HTTP
// requests are forwarded, HTTPS (and WebSocket) requests arrive as CONNECT
// tunnels. Each URL is checked with fetch.Policy.CheckURL and each
// connection is made with fetch.Policy.DialContext, which checks the address
// actually dialled. It listens on 127.0.0.1 inside Chromium's network
// namespace only (netns_linux.go), and dials from brain's.
type proxy struct {
	policy    *fetch.Policy
	logger    *slog.Logger
	observe   func(request string) // for tests; nil: nobody
	timeout   time.Duration
	ln        net.Listener
	srv       *http.Server
	rp        *httputil.ReverseProxy
	transport *http.Transport
	wg        sync.WaitGroup // the server and the tunnels' copy loops

	mu       sync.Mutex
	closed   bool
	tunnels  map[net.Conn]struct{}
	failures map[string]failure // "host:port" → the last CONNECT refused
}

// failure is an answer the proxy made instead of forwarding.
type failure struct {
	code protocol.Code
	msg  string
}

// startProxy serves on ln until close; it owns ln. observe, when not nil,
// sees every request the proxy receives ("GET http://host/path",
// "CONNECT host:port") before it is checked.
func startProxy(ln net.Listener, policy *fetch.Policy, timeout time.Duration, logger *slog.Logger, observe func(string)) *proxy {
	p := &proxy{
		policy:   policy,
		logger:   logger,
		observe:  observe,
		timeout:  timeout,
		ln:       ln,
		tunnels:  map[net.Conn]struct{}{},
		failures: map[string]failure{},
	}
	p.transport = &http.Transport{
		// Why nil: the environment's proxy would dial addresses we never
		// checked.
		Proxy:                 nil,
		DialContext:           policy.DialContext,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Out.URL is already the absolute URL Chromium asked for;
			// send the Host of that URL, whatever header came with it.
			pr.Out.Host = ""
		},
		Transport: p.transport,
		ModifyResponse: func(r *http.Response) error {
			r.Header.Del(headerCode)
			r.Header.Del(headerMessage)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.fail(w, r.URL.Host, err)
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln) // returns when close closes the server
	}()
	return p
}

// addr returns the proxy's "127.0.0.1:port".
func (p *proxy) addr() string { return p.ln.Addr().String() }

// ServeHTTP forwards one proxied request or opens one tunnel.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.observe != nil {
		if r.Method == http.MethodConnect {
			p.observe(r.Method + " " + r.Host)
		} else {
			p.observe(r.Method + " " + r.URL.String())
		}
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "this is a proxy: send absolute URLs", http.StatusBadRequest)
		return
	}
	if err := p.policy.CheckURL(r.URL); err != nil {
		p.fail(w, r.URL.Host, err)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// connect checks and opens a CONNECT tunnel to r.Host ("host:port").
func (p *proxy) connect(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if _, _, err := net.SplitHostPort(target); err != nil {
		http.Error(w, "CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	if err := p.checkTunnel(target); err != nil {
		p.fail(w, target, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	up, err := p.policy.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		p.fail(w, target, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.track(conn, up) {
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		p.untrack(conn, up)
		return
	}
	p.wg.Add(2)
	var once sync.Once
	done := func() { once.Do(func() { p.untrack(conn, up) }) }
	go func() {
		defer p.wg.Done()
		defer done()
		_, _ = io.Copy(up, bufferedReader(rw.Reader, conn))
	}()
	go func() {
		defer p.wg.Done()
		defer done()
		_, _ = io.Copy(conn, up)
	}()
}

// checkTunnel allows a tunnel to host:port when a request to it would be
// allowed under any granted scheme: a tunnel to an http port carries no
// more than the plain requests the grants allow there.
func (p *proxy) checkTunnel(target string) error {
	err := p.policy.CheckURL(&url.URL{Scheme: "https", Host: target})
	if err == nil {
		return nil
	}
	if p.policy.CheckURL(&url.URL{Scheme: "http", Host: target}) == nil {
		return nil
	}
	return err
}

// fail answers with the proxy's own response: 403 for a denial, 502 for a
// connection that failed. Both carry headerCode and headerMessage.
func (p *proxy) fail(w http.ResponseWriter, target string, err error) {
	f := failure{code: protocol.CodeUnavailable, msg: fmt.Sprintf("could not connect to %s", target)}
	status := http.StatusBadGateway
	var de *fetch.DeniedError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &de):
		f = failure{code: protocol.CodeDenied, msg: de.Msg}
		status = http.StatusForbidden
		attrs := []any{logKeyTarget, target, logKeyRule, de.Rule}
		if de.Addr.IsValid() {
			attrs = append(attrs, logKeyAddr, de.Addr.String())
		}
		p.logger.Info("page request denied", attrs...)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		host, _, _ := net.SplitHostPort(target)
		f = failure{code: protocol.CodeNotFound, msg: fmt.Sprintf("host %q does not resolve", host)}
	case errors.Is(err, context.DeadlineExceeded):
		f = failure{code: protocol.CodeTimeout, msg: fmt.Sprintf("%s did not answer in time (timeout)", target)}
		status = http.StatusGatewayTimeout
	}
	p.mu.Lock()
	if len(p.failures) >= maxFailures {
		clear(p.failures)
	}
	p.failures[target] = f
	p.mu.Unlock()
	w.Header().Set(headerCode, string(f.code))
	w.Header().Set(headerMessage, f.msg)
	http.Error(w, "brain page proxy: "+f.msg, status)
}

// lastFailure returns the last refusal of a tunnel to target.
func (p *proxy) lastFailure(target string) (failure, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.failures[target]
	return f, ok
}

// track records a tunnel so that close can end it; it reports false, and
// closes both ends, when the proxy is closed already.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

// untrack closes both ends of a tunnel and forgets them.
func (p *proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.tunnels, c)
	}
}

// close stops the server, ends every tunnel and waits for their goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	_ = p.srv.Close()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
}

// bufferedReader returns a reader that first yields what br has buffered
// (bytes the client sent right after its CONNECT header), then reads conn.
func bufferedReader(br *bufio.Reader, conn net.Conn) io.Reader {
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		return io.MultiReader(bytes.NewReader(b), conn)
	}
	return conn
}
