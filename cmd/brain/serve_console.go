package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/brainrt/brain/console"
	"github.com/brainrt/brain/server"
)

// consoleConfig is the config's `console:` key (docs/console.md).
type consoleConfig struct {
	// FrameOrigins are origins iframe render sources may load from, beyond
	// those of the iframe sources registered when the page loads.
	FrameOrigins []string `yaml:"frame_origins"`
	// WebComponentOrigins are the origins web-component render sources may
	// load scripts from; none by default.
	WebComponentOrigins []string `yaml:"web_component_origins"`
	// Hosts are the host names the console answers to beyond IP
	// addresses and localhost (a DNS-rebinding guard refuses any other
	// Host header), e.g. the name its TLS certificate is for.
	Hosts []string `yaml:"hosts"`
}

// consoleAddress resolves --console-addr: "off" is none; "" is the default,
// loopback on the port after the kernel's (127.0.0.1:7778 beside the
// default 127.0.0.1:7777; port 0, any free port, when the kernel's is 0).
// Loopback whatever --addr is: exposing the console is a decision of its
// own.
func consoleAddress(flag, kernelAddr string) string {
	if flag != "" {
		return flag
	}
	port := 7778
	if _, p, err := net.SplitHostPort(kernelAddr); err == nil {
		if n, err := strconv.Atoi(p); err == nil && n >= 0 && n < 65535 {
			port = n + 1
			if n == 0 {
				port = 0
			}
		}
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// inUseHint is what to do when a listener's port is taken, for a listen
// error; "" for any other.
func inUseHint(err error, flag string) string {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return ""
	}
	return " (another process has this port — a brain serve still running? — or give another with " + flag + ")"
}

// listenConsole opens the console's listener; "" and "off" mean none.
func listenConsole(addr string, tlsConfig *tls.Config) (net.Listener, error) {
	if addr == "" || addr == "off" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (--console-addr): %w%s", addr, unwrapOp(err), inUseHint(err, "--console-addr"))
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	return l, nil
}

// newConsole makes the operator console of srv. Its sealing key and its
// sign-outs live in the data directory, beside tokens.json, so that a
// sign-in survives a restart. model is the name of the model turns run
// on, "" for none.
func newConsole(srv *server.Server, tokens *server.Tokens, cfg *serveConfig, dataDir, model string, logger *slog.Logger) (*server.Console, error) {
	return server.NewConsole(server.ConsoleOptions{Server: srv, Tokens: tokens, Assets: console.Assets(), Dir: dataDir,
		Hosts: cfg.Console.Hosts, Model: model,
		FrameOrigins: cfg.Console.FrameOrigins, WebComponentOrigins: cfg.Console.WebComponentOrigins, Logger: logger})
}

// serveConsole serves the operator console c on l until ctx ends.
func serveConsole(ctx context.Context, l net.Listener, c *server.Console, logger *slog.Logger) {
	hs := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	if err := server.Serve(ctx, hs, l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("console stopped", slog.String("error", err.Error()))
	}
}

// printCreatedTokens prints the tokens created at this start, once.
func printCreatedTokens(w io.Writer, path string, created []server.Token) {
	for _, t := range created {
		what := "a " + t.Side + " token"
		if t.Side == "operator" || t.Side == "app" || t.Side == "environment" {
			what = "an " + t.Side + " token"
		}
		if t.Name != "" {
			what += fmt.Sprintf(" named %q", t.Name)
		}
		fmt.Fprintf(w, "created %s (saved in %s):\n\n    %s\n\n", what, path, t.Token)
	}
}

// validate refuses anything but http(s) origins: scheme://host[:port],
// nothing after it; and hosts that are not host names.
func (c consoleConfig) validate() error {
	for i, h := range c.Hosts {
		if h == "" || strings.ContainsAny(h, ":/[]@ ") || !hostPattern.MatchString(h) {
			return fmt.Errorf("console.hosts[%d]: %q is not a host name: want a name without scheme or port, e.g. console.example.com", i, h)
		}
	}
	for key, list := range map[string][]string{"frame_origins": c.FrameOrigins, "web_component_origins": c.WebComponentOrigins} {
		for i, o := range list {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return fmt.Errorf("console.%s[%d]: %q is not an origin: want scheme://host[:port], e.g. https://widgets.example.com", key, i, o)
			}
		}
	}
	return nil
}

var hostPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.\-]*[A-Za-z0-9])?$`)
