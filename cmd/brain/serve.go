package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/settle"
	"github.com/brainrt/brain/internal/telemetry"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// runServe is `brain serve`: the kernel. One process, loopback by default,
// sessions stored in an embedded NATS JetStream under --data.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "serve [--addr HOST:PORT] [--data DIR] [--config FILE] [--tls-cert FILE --tls-key FILE]",
		`Runs the kernel: WebSocket and MCP endpoints per session, sessions stored in an
embedded NATS JetStream under --data (docs/serve.md). The first start creates
the tokens file and prints the tokens. SIGINT or SIGTERM stop it gracefully.`,
		"brain serve --addr 127.0.0.1:7777 --config brain.yaml")
	addr := fs.String("addr", "127.0.0.1:7777", "address to listen on (loopback by default; elsewhere, use TLS)")
	data := fs.String("data", "brain-data", "data directory: tokens, sessions, compiled code")
	natsURL := fs.String("nats", "", "use this NATS server (JetStream) instead of the embedded one")
	nodeID := fs.String("node-id", "", "run as this node of a cluster sharing --nats (docs/cluster.md)")
	advertise := fs.String("advertise", "", "cluster: this node's URL for the other nodes (default: http(s)://--addr)")
	leaseTTL := fs.Duration("lease-ttl", 0, "cluster: session lease TTL, the same on every node (default 20s)")
	shutdownTimeout := fs.Duration("shutdown-timeout", defaultShutdownTimeout, "on SIGINT or SIGTERM, stop within this long: running tools get until then to finish; calls awaiting approvals or peers are left for the next start")
	config := fs.String("config", "", "environment config (docs/serve.md); default: the example tools over ./workspace")
	idle := fs.Duration("hibernate", 10*time.Minute, "drop sessions idle this long from memory (they wake on the next message)")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS and WSS with this PEM certificate (chain) file; needs --tls-key")
	tlsKey := fs.String("tls-key", "", "the PEM private key of --tls-cert")
	consoleAddr := fs.String("console-addr", "", `the operator console's own listener (docs/console.md); default 127.0.0.1 on the port after --addr's; "off" disables it`)
	verbose := fs.Bool("v", false, "log debug messages")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "serve", fs.Args()); !ok {
		return code
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usageError(stderr, "serve", "--tls-cert and --tls-key go together")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	a := serveArgs{addr: *addr, data: *data, nats: *natsURL, config: *config, idle: *idle, tlsCert: *tlsCert, tlsKey: *tlsKey, consoleAddr: *consoleAddr}
	a.nodeID, a.advertise, a.leaseTTL = *nodeID, *advertise, *leaseTTL // serve_cluster.go
	a.shutdownTimeout = *shutdownTimeout
	if *shutdownTimeout < 0 || *idle < 0 {
		return usageError(stderr, "serve", "--shutdown-timeout and --hibernate take a duration of 0 or more (0: the default), not %v", min(*shutdownTimeout, *idle))
	}
	if err := checkClusterFlags(a); err != nil {
		return usageError(stderr, "serve", "%v", err)
	}
	if err := serve(ctx, a, stdout, logger); err != nil {
		fmt.Fprintln(stderr, "brain serve:", err)
		return exitFail
	}
	return exitOK
}

type serveArgs struct {
	addr, data, nats, config string
	tlsCert, tlsKey          string
	consoleAddr              string // "": the default (consoleAddress); "off": no console
	idle                     time.Duration
	ready                    func(addr string) // tests: called once listening
	nodeID, advertise        string            // cluster (serve_cluster.go)
	leaseTTL                 time.Duration
	shutdownTimeout          time.Duration  // --shutdown-timeout; 0: the default
	settle                   settle.Options // tests: internal/settle's timings; zero: its defaults
}

func serve(ctx context.Context, a serveArgs, stdout io.Writer, logger *slog.Logger) error {
	// Everything that can fail on the command line's say-so fails before
	// anything is created: the TLS files, the address, the config.
	var tlsConfig *tls.Config
	if a.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	l, err := net.Listen("tcp", a.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w%s", a.addr, unwrapOp(err), inUseHint(err, "--addr"))
	}
	defer l.Close()
	warnPlaintext(logger, l.Addr(), tlsConfig != nil)
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	cl, err := listenConsole(consoleAddress(a.consoleAddr, a.addr), tlsConfig)
	if err != nil {
		return err
	}
	if cl != nil {
		defer cl.Close()
	}
	cfg, err := loadServeConfig(a.config, a.data)
	if err != nil {
		return err
	}
	var turnDriver *driver.Driver // chat.go, docs/agent.md
	if cfg.Model.configured() {
		if turnDriver, err = cfg.Model.newDriver(os.Getenv, logger); err != nil {
			return fmt.Errorf("%s: model: %w", a.config, err)
		}
	}
	if err := cfg.Console.validate(); err != nil {
		return fmt.Errorf("%s: %w", a.config, err)
	}
	tokens, _, created, err := server.LoadOrCreateTokens(a.data)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if created {
		printCreatedTokens(stdout, filepath.Join(a.data, "tokens.json"), tokens.Created())
	}
	// Tokens are added and revoked by editing the file, without a restart.
	go server.WatchTokens(ctx, tokens, filepath.Join(a.data, "tokens.json"), 0, logger)
	// Metrics and traces (docs/operations.md); tracing only when the
	// OTEL_* variables ask for it.
	tp, stopTracing, err := telemetry.TracerProviderFromEnv(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(sctx)
	}()
	var mgr *server.Manager
	var srv *server.Server
	var st *store.Store
	tel := telemetry.New(&telemetry.Options{TracerProvider: tp, Logger: logger,
		Sessions:    func() (int, int) { return mgr.Counts(ctx) },
		Connections: func() map[string]int { return srv.Connections() },
		Pools:       func() []telemetry.PoolStat { return poolStats(cfg.host) },
		Store:       func() telemetry.StoreStat { return storeStat(st) }, // serve_cluster.go
	})
	replicas := 0
	if a.nodeID != "" {
		replicas = clusterReplicas // serve_cluster.go
	}
	st, err = store.Open(ctx, &store.Options{URL: a.nats, DataDir: filepath.Join(a.data, "nats"), Logger: logger, OnAppend: tel.ObserveAppend, Replicas: replicas})
	if err != nil {
		// The store's errors name the directory themselves.
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("open the session store: %w (is another brain using --data %s?)", err, a.data)
		}
		return fmt.Errorf("open the session store: %w", err)
	}
	defer st.Close()
	if a.nats == "" { // the embedded store, in the data directory (storeid.go)
		if err := checkStoreID(a.data, st.Created(), st.Oldest(), logger); err != nil {
			return err
		}
		lastSeq, events := st.OpenedCounts()
		checkStoreCounts(a.data, lastSeq, events, logger)
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	cluster, leaveCluster, err := joinCluster(ctx, a, st, l.Addr(), scheme, logger) // serve_cluster.go
	if err != nil {
		return err
	}
	defer leaveCluster()

	env, closeEnv, err := buildEnvironment(ctx, cfg, a.data, logger)
	if err != nil {
		return err
	}
	defer closeEnv()

	imports := &importSet{cfg: cfg, log: logger, bySession: map[*session.Session][]*mcpbridge.Imported{}}
	mcpHandler := mcpbridge.Handler(func(*http.Request) *session.Session { return nil },
		&mcpbridge.ServerOptions{Admit: func(s *session.Session) *protocol.Error { return mgr.Admit(s) },
			Elicitation: cfg.Approvals.MCPElicitation})
	defer mcpHandler.Close()
	sessionOpts := session.Options{Logger: logger, Observe: tel.Observe}
	cfg.Limits.session(&sessionOpts)
	cfg.Approvals.session(&sessionOpts)
	mgr = server.NewManager(server.ManagerOptions{
		Store:   st,
		Session: sessionOpts,
		Limits:  cfg.Limits.server(),
		Attach: func(s *session.Session) error {
			if turnDriver != nil {
				turnDriver.Attach(s) // chat.go: the config's model runs the turns peers start
			}
			if err := env.Expose(s); err != nil {
				return err
			}
			return imports.attach(ctx, s)
		},
		Release: func(s *session.Session) {
			env.Forget(s)
			imports.release(s)
			mcpHandler.Release(s)
		},
		Logger:   logger,
		Lease:    cluster.lease, // nil unless --node-id (serve_cluster.go)
		Holder:   cluster.holder,
		LeaseTTL: cluster.ttl,
		Node:     a.nodeID,
	})
	origins, _ := cfg.browserOriginPatterns() // checked as the config was loaded
	srv = server.New(server.Options{Tokens: tokens, Manager: mgr, Logger: logger, MCP: mcpHandler.Endpoint, Metrics: tel.Handler(),
		Ready: storeReady(st), OriginPatterns: origins}) // serve_cluster.go
	var consoleH *server.Console
	if cl != nil {
		model := ""
		if turnDriver != nil {
			model = cfg.Model.Name
		}
		if consoleH, err = newConsole(srv, tokens, cfg, a.data, model, logger); err != nil { // serve_console.go
			return err
		}
	}

	httpScheme, wsScheme := "http", "ws"
	if tlsConfig != nil {
		httpScheme, wsScheme = "https", "wss"
	}
	fmt.Fprintf(stdout, "brain serve: listening on %s://%s\n", httpScheme, l.Addr())
	fmt.Fprintf(stdout, "  WebSocket: %s://%s/v1/sessions/<id>/ws   MCP: %s://%s/v1/sessions/<id>/mcp\n", wsScheme, l.Addr(), httpScheme, l.Addr())
	fmt.Fprintf(stdout, "  tools: %v\n", toolList(env))
	if turnDriver != nil {
		fmt.Fprintf(stdout, "  model: %s (turns started with turn_start run on it)\n", cfg.Model.Name)
	}
	if len(cfg.BrowserOrigins) > 0 {
		// The patterns as they match (default ports dropped, punycode), an
		// IPv6 literal's brackets unescaped.
		fmt.Fprintf(stdout, "  browser pages of other sites let in: %s\n", strings.NewReplacer(`\[`, "[", `\]`, "]").Replace(strings.Join(origins, " ")))
	}
	fmt.Fprintf(stdout, "  metrics: %s://%s/metrics (operator token)\n", httpScheme, l.Addr())
	if tp != nil {
		logger.Info("tracing: exporting spans over OTLP (OTEL_* variables)")
	}
	if cl != nil {
		fmt.Fprintf(stdout, "  console: %s://%s/ (sign in with the operator token)\n", httpScheme, cl.Addr())
		go serveConsole(ctx, cl, consoleH, logger)
	}
	if a.ready != nil {
		a.ready(l.Addr().String())
	}
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if n := mgr.Hibernate(a.idle); n > 0 {
					logger.Info("sessions hibernated", slog.Int("count", n))
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	// Once the node goes quiet after a busy spell, its free memory goes
	// back to the system (internal/settle; docs/operations.md, "Memory").
	settleCtx, stopSettle := context.WithCancel(ctx)
	defer stopSettle()
	settleOpts := a.settle
	settleOpts.Logger = logger
	go settle.Run(settleCtx, &settleOpts)
	// Requests inherit connCtx, which a stop ends once the sessions'
	// journals are closed (stopGracefully), so that long-lived ones
	// (WebSockets, MCP requests waiting on a call) end then, and what their
	// end causes is never journaled.
	connCtx, endConns := context.WithCancelCause(context.Background())
	defer endConns(nil)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return connCtx },
		ErrorLog:    slog.NewLogLogger(logger.Handler(), slog.LevelDebug)} // TLS handshake noise and the like
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = stopGracefully(a.shutdownTimeout, mgr, hs, func(cause error) {
			// The MCP calls parked on approvals or peers are answered
			// (unavailable) before the requests' contexts end with the
			// connections: ended first, they would be cut unanswered.
			mcpHandler.Detach()
			endConns(cause)
		}, logger)
		if a.nats == "" { // the embedded store: its counts, for the next start (storeid.go)
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			if lastSeq, events, cerr := st.Counts(cctx); cerr == nil {
				if werr := recordStoreCounts(a.data, lastSeq, events); werr != nil {
					logger.Warn("brain serve: record the session store's counts", slog.String("error", werr.Error()))
				}
			}
			ccancel()
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	logger.Info("brain serve: stopped")
	return err
}

// defaultShutdownTimeout is --shutdown-timeout's default.
const defaultShutdownTimeout = 10 * time.Second

// stopGracefully stops within bound (server/shutdown.go has the order):
// no new sessions, running tools given until the bound to finish, the
// sessions' journals closed; then the connections end (endConns:
// WebSockets with 1001 and a reason, MCP calls parked on approvals or
// peers answered unavailable) and the HTTP server shuts down; then every session
// leaves memory and its lease, in a cluster, is released — all before the
// deferred closes of the environment and the store. Calls awaiting an
// approval or a peer's result are left as the journal holds them, for the
// next start or owner to resume.
func stopGracefully(bound time.Duration, mgr *server.Manager, hs *http.Server, endConns func(error), logger *slog.Logger) error {
	if bound <= 0 {
		bound = defaultShutdownTimeout
	}
	logger.Info("brain serve: stopping", slog.Duration("within", bound))
	deadline := time.Now().Add(bound)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	mgr.Stop(ctx)
	endConns(server.ErrStopping)
	if err := hs.Shutdown(ctx); err != nil {
		logger.Warn("brain serve: connections still open at the stop's bound: closing them", slog.String("error", err.Error()))
		_ = hs.Close()
	}
	// Releasing leases gets a few seconds of its own even past the bound:
	// a lease not released makes its session wait out the lease TTL.
	rctx, rcancel := context.WithTimeout(context.Background(), max(time.Until(deadline), 3*time.Second))
	defer rcancel()
	if err := mgr.Close(rctx); err != nil {
		logger.Warn("brain serve: release session leases", slog.String("error", err.Error()))
	}
	return nil
}

// buildEnvironment sets up the config's environment and attaches its tools
// and artifacts, with the config's policy. If any tool fails to attach, the
// error lists every failure, each with its tool, code and reason, and
// nothing is started.
func buildEnvironment(ctx context.Context, cfg *serveConfig, data string, logger *slog.Logger) (*kernel.Environment, func(), error) {
	rules, err := cfg.policyRules()
	if err != nil {
		return nil, nil, err
	}
	kopts := &kernel.Options{Logger: logger, Workspace: "workspace", Policies: rules}
	var env *kernel.Environment
	var setup kernel.SetupReceipt
	if cfg.Grants == "" { // no tools of its own: no handles to provide
		env = kernel.New(kopts)
		setup = env.Setup(ctx)
	} else {
		g, err := provide.Load(cfg.path(cfg.Grants))
		if err != nil {
			return nil, nil, err
		}
		if env, setup, err = provide.Environment(ctx, g, kopts); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range setup.Failures {
		logger.Warn("handle unavailable", slog.String("handle", f.Name), slog.String("reason", f.Reason))
	}
	var h *host.Host
	cleanup := func() {
		_ = env.Close()
		if h != nil {
			_ = h.Close(context.Background())
		}
	}
	var atts []kernel.Attachment
	bindings := func(name string) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for k, v := range cfg.Bindings[name] {
			b, _ := json.Marshal(v)
			out[k] = b
		}
		return out
	}
	for _, n := range cfg.Tools {
		atts = append(atts, kernel.Attachment{Tool: builtinTools[n], Bindings: bindings(n)})
	}
	if cfg.Artifacts != "" {
		h, err = host.New(ctx, &host.Options{CacheDir: filepath.Join(data, "wazero"), Logger: logger})
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cfg.host = h // for the pool metrics
		// JavaScript artifacts (runtime js/1) go to their own host (scripts.go).
		arts, err := loadArtifactDir(cfg.path(cfg.Artifacts), h, &scriptHost{cacheDir: filepath.Join(data, "wazero"), log: logger})
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		for _, a := range arts {
			atts = append(atts, kernel.Attachment{Tool: a, Bindings: bindings(a.Manifest().Name)})
		}
	}
	if rec := env.Attach(ctx, atts...); !rec.OK() {
		cleanup()
		return nil, nil, attachError(rec, len(atts))
	}
	if err := cfg.checkPoliciesMatch(rules, toolList(env)); err != nil {
		cleanup()
		return nil, nil, err
	}
	return env, cleanup, nil
}

// attachError lists every failure of an attach receipt, one per line,
// each with what to change in the config when that is plain.
func attachError(rec kernel.AttachReceipt, total int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "attach: %d of %d tools failed", len(rec.Failures), total)
	for _, f := range rec.Failures {
		fmt.Fprintf(&b, "\n  %s: %s: %s", f.Name, f.Code, f.Reason)
		if h := attachHint(f, false); h != "" {
			fmt.Fprintf(&b, " (%s)", h)
		}
	}
	return errors.New(b.String())
}

// attachHint says how to give an attach what it lacked — a handle the
// grants do not provide, a binding without a value — in brain run's
// flags or a config's keys; "" for other failures.
func attachHint(f kernel.Failure, forRun bool) string {
	switch {
	case f.Code == protocol.CodeUnavailable && strings.Contains(f.Reason, "which this environment does not provide"):
		if forRun {
			return "grant it with --grants FILE, a grants file with a section for each handle: docs/grants.md; examples/grants.yaml grants them all"
		}
		return "grant it in the config's grants: file, a section for each handle: docs/grants.md"
	case f.Code == protocol.CodeInvalidInput && strings.Contains(f.Reason, "has no value"):
		if forRun {
			return "give it with --binding NAME=JSON"
		}
		return "give it in the config's bindings: under the tool's name: docs/serve.md"
	}
	return ""
}

func toolList(env *kernel.Environment) []string {
	var out []string
	for _, m := range env.Tools() {
		out = append(out, m.Name)
	}
	return out
}

// importSet imports the config's MCP servers into each live session.
type importSet struct {
	cfg       *serveConfig
	log       *slog.Logger
	mu        sync.Mutex
	bySession map[*session.Session][]*mcpbridge.Imported
}

func (is *importSet) attach(ctx context.Context, s *session.Session) error {
	for _, m := range is.cfg.MCPServers {
		im, err := mcpbridge.Import(ctx, s, mcpbridge.ServerConfig{ID: m.ID, Command: m.Command, Env: m.Env, URL: m.URL, Logger: is.log})
		if err != nil {
			is.log.Warn("mcp import failed", slog.String("server", m.ID), slog.String("session", s.ID()), slog.String("error", err.Error()))
			continue
		}
		is.mu.Lock()
		is.bySession[s] = append(is.bySession[s], im)
		is.mu.Unlock()
	}
	return nil
}

func (is *importSet) release(s *session.Session) {
	is.mu.Lock()
	ims := is.bySession[s]
	delete(is.bySession, s)
	is.mu.Unlock()
	for _, im := range ims {
		_ = im.Close()
	}
}

// warnPlaintext warns when brain serves plain HTTP beyond loopback.
func warnPlaintext(logger *slog.Logger, addr net.Addr, tls bool) {
	if tls || isLoopback(addr) {
		return
	}
	logger.Warn("listening beyond loopback without TLS: traffic, tokens included, is unencrypted; "+
		"serve TLS with --tls-cert and --tls-key, or put a TLS-terminating proxy (Caddy, nginx) in front and keep --addr on loopback",
		slog.String("addr", addr.String()))
}

// isLoopback reports whether addr is a loopback address.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// unwrapOp drops the *net.OpError's own "listen tcp <addr>:" prefix, which
// the caller's context already says.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
