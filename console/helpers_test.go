package console_test

// The browser tests' kernel and tab: a kernel with its console on
// 127.0.0.1, a client over WebSocket, an iframe render server; headless
// Chromium with its own profile; helpers that fail the test.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/console"
	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/internal/browsertest"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

var update = flag.Bool("update", false, "rewrite the screenshots in docs/console/")

const (
	clientToken   = "client-token-0123456789abcdef"
	operatorToken = "operator-token-0123456789abcdef"
	modelToken    = "model-token-0123456789abcdef"
	wait          = 30 * time.Second // bounds every wait on the browser (2 shared cores)
)

// dropListener is the console's listener, able to drop every connection
// (a network failure) and to refuse new ones while down.
type dropListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	down  atomic.Bool
}

func (l *dropListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.down.Load() {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns[c] = struct{}{}
		l.mu.Unlock()
		return c, nil
	}
}

func (l *dropListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
		delete(l.conns, c)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// kernel is a brain kernel with its console, a client connected over
// WebSocket, and a server for an iframe render source.
type kernel struct {
	t       *testing.T
	mgr     *server.Manager
	api     *httptest.Server
	console *httptest.Server
	drop    *dropListener
	frames  *httptest.Server
	seen    chan string // props the iframe received
	tokens  *server.Tokens
	apiSrv  *server.Server
	opts    kernelOptions
	handler atomic.Pointer[server.Console] // the console behind k.console
}

// kernelOptions vary a test kernel: a model the turns run on (its name
// shown by the console), a data directory for the console's key, how
// many events a session keeps for replay (0: 16384), and the operator
// token's name ("": ada).
type kernelOptions struct {
	model        driver.Model
	modelName    string
	dir          string
	logSize      int
	operatorName string
}

func newKernel(t *testing.T) *kernel { return newKernelWith(t, kernelOptions{}) }

func newKernelWith(t *testing.T, o kernelOptions) *kernel {
	t.Helper()
	if o.operatorName == "" {
		o.operatorName = "ada"
	}
	tokens, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Name: "web", Tenant: "t"},
		server.Token{Token: operatorToken, Side: "operator", Name: o.operatorName},
		server.Token{Token: modelToken, Side: "model", Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	k := &kernel{t: t, seen: make(chan string, 16), tokens: tokens, opts: o}
	// ApprovalTimeout: a failed step leaves no call waiting past the test.
	mo := server.ManagerOptions{Session: session.Options{LogSize: 16384, ApprovalTimeout: 20 * time.Second}}
	if o.logSize > 0 {
		mo.Session.LogSize = o.logSize
	}
	if o.model != nil {
		d := driver.New(o.model, &driver.Options{System: "You are the console's test assistant."})
		mo.Attach = func(s *session.Session) error { d.Attach(s); return nil }
	}
	k.mgr = server.NewManager(mo)
	mcpH := mcpbridge.Handler(nil, nil)
	t.Cleanup(func() { _ = mcpH.Close() })
	api := server.New(server.Options{Tokens: tokens, Manager: k.mgr, MCP: mcpH.Endpoint})
	k.apiSrv = api
	k.api = httptest.NewServer(api)
	t.Cleanup(k.api.Close)

	frameMux := http.NewServeMux()
	frameMux.HandleFunc("GET /frame.html", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><body>waiting for props<script src="/frame.js"></script></body>`)
	})
	frameMux.HandleFunc("GET /frame.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `window.addEventListener('message', (e) => {
  const p = JSON.stringify(e.data && e.data.props);
  document.body.textContent = 'chart props: ' + p;
  fetch('/seen?v=' + encodeURIComponent(p), {mode: 'no-cors'});
});`)
	})
	frameMux.HandleFunc("GET /card.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Access-Control-Allow-Origin", "*") // a module from another origin
		fmt.Fprint(w, `customElements.define('brain-card', class extends HTMLElement {
  set props(p) { this._p = p; this.textContent = 'card: ' + JSON.stringify(p); }
  get props() { return this._p; }
});`)
	})
	frameMux.HandleFunc("GET /seen", func(w http.ResponseWriter, r *http.Request) {
		select {
		case k.seen <- r.URL.Query().Get("v"):
		default:
		}
	})
	k.frames = httptest.NewServer(frameMux)
	t.Cleanup(k.frames.Close)

	k.handler.Store(k.newConsole(tokens))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k.drop = &dropListener{Listener: l, conns: map[net.Conn]struct{}{}}
	k.console = &httptest.Server{Listener: k.drop, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.handler.Load().ServeHTTP(w, r)
	})}}
	k.console.Start()
	t.Cleanup(k.console.Close)
	return k
}

func (k *kernel) newConsole(tokens *server.Tokens) *server.Console {
	k.t.Helper()
	c, err := server.NewConsole(server.ConsoleOptions{Server: k.apiSrv, Tokens: tokens, Assets: console.Assets(), Dir: k.opts.dir, Model: k.opts.modelName,
		FrameOrigins: []string{k.frames.URL}, WebComponentOrigins: []string{k.frames.URL}})
	if err != nil {
		k.t.Fatal(err)
	}
	return c
}

// restartConsole is a restart of brain serve as the console sees it: a
// console made again on the same data directory, at the same address,
// with tokens (the file as it is then), and every connection dropped.
func (k *kernel) restartConsole(tokens *server.Tokens) {
	k.t.Helper()
	k.drop.down.Store(true)
	k.drop.dropAll()
	k.handler.Store(k.newConsole(tokens))
	k.drop.down.Store(false)
}

// session returns the live session id, held for the test: the client's
// (its tenant's), created if it does not exist.
func (k *kernel) session(id string) *session.Session {
	k.t.Helper()
	client, _ := k.tokens.Identify(clientToken)
	s, release, err := k.mgr.AcquireAs(context.Background(), client, id, true)
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(release)
	return s
}

// connectClient opens the client's WebSocket to session id and registers
// caps; it answers nothing (the tests' client capabilities are never
// invoked).
func (k *kernel) connectClient(id string, caps ...protocol.Capability) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(k.api.URL, "http")+"/v1/sessions/"+id+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + clientToken}}})
	if err != nil {
		k.t.Fatal(err)
	}
	c.SetReadLimit(-1)
	k.t.Cleanup(func() { c.CloseNow() })
	b, _ := protocol.EncodeFrame(&protocol.Frame{ID: "r1", Msg: &protocol.CapabilityRegister{Capabilities: caps}})
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		k.t.Fatal(err)
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			k.t.Fatal(err)
		}
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			k.t.Fatal(err)
		}
		if f.Ref == "r1" {
			if e, ok := f.Msg.(*protocol.ErrorReply); ok {
				k.t.Fatalf("register: %s: %s", e.Code, e.Message)
			}
			break
		}
	}
	go func() { // keep reading so that the kernel never sees a stuck peer
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	}()
}

func (k *kernel) mcpClient(id string) *mcp.ClientSession {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: k.api.URL + "/v1/sessions/" + id + "/mcp", HTTPClient: &http.Client{Transport: bearer{modelToken}}}, nil)
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// browser starts headless Chromium with its own profile and TMPDIR, as
// provide/browser does, and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	ctx := browsertest.Tab(t, t.Logf, chromedp.WindowSize(1280, 900))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// tab wraps the browser context with helpers that fail the test.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func (b tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) into T.
func eval[T any](b tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits for a JavaScript expression to be truthy.
func (b tab) until(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		tctx, tcancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer tcancel()
		text, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`(() => { const o = document.querySelector('#overlay:not([hidden])'); return (o ? 'overlay:\n' + o.innerText.slice(0, 1500) + '\nmain:\n' : '') + document.querySelector('main').innerText.slice(0, 2000); })()`))
		b.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, text)
	}
}

// screenshot saves the viewport (or the element sel) to
// docs/console/<name>.png with -update.
func (b tab) screenshot(name string) {
	b.t.Helper()
	if !*update {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "console", name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// signIn signs the browser in as the operator.
func signIn(b tab, k *kernel) {
	b.t.Helper()
	b.do("open the console", chromedp.Navigate(k.console.URL+"/"))
	b.until("the sign-in form", `document.querySelector('#token') !== null`)
	b.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), operatorToken), chromedp.Click(chromedp.CSS(".signin button[type=submit]")))
	b.until("the operator's name", `document.querySelector('#operator-name')?.textContent === `+js(k.opts.operatorName))
}

// endTurnAtCleanup cancels s's running turn when the test ends: a turn
// left running (a scripted step waiting for its context) would hold the
// kernel's close.
func endTurnAtCleanup(t *testing.T, s *session.Session) {
	t.Cleanup(func() {
		if _, running := s.CurrentTurn(); running {
			_ = s.CancelTurn("the test ended")
		}
	})
}

// openLive opens session id's conversation in b and waits until it is
// live, its message box enabled.
func (b tab) openLive(k *kernel, id string) {
	b.t.Helper()
	b.do("open the session", chromedp.Navigate(k.console.URL+"/#/s/"+id))
	b.until("the conversation, live", `document.querySelector('#conversation .msg-input')?.disabled === false && brainConsole.session()?.conn?.state === 'live'`)
}
