package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/store"
	"github.com/brainrt/brain/tool"
)

// runCLI runs brain with args and returns the exit code and both outputs.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(testutil.Context(t), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestHelpConventions: as go and git do it. Plain brain prints usage to
// stderr and exits 2; help and every command's -h, --help and brain help
// <cmd> print to stdout, exit 0, and show the synopsis, flags and an
// example.
func TestHelpConventions(t *testing.T) {
	code, stdout, stderr := runCLI(t)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "Usage: brain <command>") {
		t.Errorf("brain: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: brain <command>") || !strings.Contains(stdout, "Exit status: 0 ok, 1 the job failed, 2 bad usage") {
			t.Errorf("brain %v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	for _, c := range commands() {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runCLI(t, args...)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				if !strings.Contains(stdout, "Usage: brain "+c.name) {
					t.Errorf("help lacks the synopsis:\n%s", stdout)
				}
				// An example follows; it may set a variable first (KEY=… brain chat).
				if !regexp.MustCompile(`\nExample:\n  .*\bbrain ` + c.name + `\b`).MatchString(stdout) {
					t.Errorf("help lacks an example of brain %s:\n%s", c.name, stdout)
				}
				if c.name != "version" && c.name != "inspect" && !strings.Contains(stdout, "Flags:\n  -") {
					t.Errorf("help lists no flags:\n%s", stdout)
				}
			})
		}
	}
	code, _, stderr = runCLI(t, "help", "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("brain help frobnicate: exit %d, %q", code, stderr)
	}
}

// TestUsageErrors: bad usage is exit 2 with a message naming the problem
// on stderr; unexpected positional arguments are refused, not ignored.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"bad flag", []string{"demo", "-nope"}, "brain demo: flag provided but not defined: -nope\nRun 'brain demo -h' for usage.\n"},
		{"flag without its value", []string{"serve", "--addr"}, "brain serve: flag needs an argument: -addr\nRun 'brain serve -h' for usage.\n"},
		{"serve extra", []string{"serve", "now"}, `brain serve: unexpected argument "now"`},
		{"mcp extra", []string{"mcp", "x"}, `brain mcp: unexpected argument "x"`},
		{"env extra", []string{"env", "--kernel", "http://127.0.0.1:1", "--session", "s", "--token", "t", "x"}, `brain env: unexpected argument "x"`},
		{"env missing", []string{"env"}, "--kernel, --session and --token are required"},
		{"demo extra", []string{"demo", "again"}, `brain demo: unexpected argument "again"`},
		{"version extra", []string{"version", "x"}, `unexpected argument "x"`},
		{"inspect none", []string{"inspect"}, "want exactly one ARTIFACT, got 0"},
		{"inspect two", []string{"inspect", "a", "b"}, "want exactly one ARTIFACT, got 2"},
		{"run two", []string{"run", "a", "b"}, "want exactly one ARTIFACT"},
		{"run bad input", []string{"run", "a.tool.json", "--input", "{nope"}, "--input is not JSON"},
		{"build no -o", []string{"build", "./x"}, "-o DIR is required"},
		{"tls half", []string{"serve", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{"negative shutdown timeout", []string{"serve", "--shutdown-timeout", "-1s"}, "--shutdown-timeout and --hibernate take a duration of 0 or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
			if strings.Contains(stderr, "Flags:") {
				t.Errorf("usage error printed the whole usage: %q", stderr)
			}
			if stdout != "" {
				t.Errorf("usage error wrote to stdout: %q", stdout)
			}
		})
	}
}

// TestVersion: brain version and --version print the version and the
// build information.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "brain ") || !strings.Contains(stdout, "go1.") ||
			!strings.Contains(stdout, "module   github.com/brainrt/brain") {
			t.Errorf("brain %v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestServePortClash: a port in use fails the start (exit 1), saying what
// to do, before any token, tokens file or workspace is created.
func TestServePortClash(t *testing.T) {
	t.Chdir(t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, stdout, stderr := runCLI(t, "serve", "--addr", l.Addr().String(), "--data", "data")
	if code != 1 || !strings.Contains(stderr, "brain serve: listen on "+l.Addr().String()+": bind: address already in use (another process has this port — a brain serve still running? — or give another with --addr)") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stdout, "token") {
		t.Errorf("a token was printed: %q", stdout)
	}
	for _, p := range []string{"data", "workspace"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after a failed start (%v)", p, err)
		}
	}
}

// TestServeStoreLocked: a data directory in use by another brain is an
// error that says so once, with one context per layer.
func TestServeStoreLocked(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := testutil.Context(t)
	st, err := store.Open(ctx, &store.Options{DataDir: filepath.Join("data", "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// serve itself, not the command: no other listener (the console) is
	// opened, so nothing but the store can fail.
	err = serve(ctx, serveArgs{addr: "127.0.0.1:0", data: "data", idle: time.Hour}, io.Discard, slog.New(slog.DiscardHandler))
	want := "open the session store: store: data directory in use: data/nats (is another brain using --data data?)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// TestServeTLS: with --tls-cert and --tls-key, brain serve speaks HTTPS.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	certFile, keyFile, pool := selfSigned(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr, out, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", idle: time.Hour, tlsCert: certFile, tlsKey: keyFile})
	if !strings.Contains(out.String(), "listening on https://"+addr) || !strings.Contains(out.String(), "wss://"+addr) {
		t.Errorf("serve printed %q", out.String())
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /healthz over TLS: %s", resp.Status)
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP was served beside TLS")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	code, _, stderr := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--data", "data2", "--tls-cert", keyFile, "--tls-key", keyFile)
	if code != 1 || !strings.Contains(stderr, "brain serve: --tls-cert/--tls-key:") {
		t.Errorf("bad certificate: exit %d, %q", code, stderr)
	}
}

// TestPlaintextWarning: beyond loopback without TLS, brain serve warns and
// names the TLS options; on loopback it does not.
func TestPlaintextWarning(t *testing.T) {
	tests := []struct {
		addr string
		tls  bool
		warn bool
	}{
		{"127.0.0.1:7777", false, false},
		{"[::1]:7777", false, false},
		{"0.0.0.0:7777", false, true},
		{"192.168.1.5:7777", false, true},
		{"192.168.1.5:7777", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a, err := net.ResolveTCPAddr("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			warnPlaintext(slog.New(slog.NewTextHandler(&buf, nil)), a, tt.tls)
			got := buf.String()
			if tt.warn != (got != "") {
				t.Fatalf("warned %q, want a warning: %v", got, tt.warn)
			}
			if tt.warn && (!strings.Contains(got, "unencrypted") || !strings.Contains(got, "--tls-cert and --tls-key")) {
				t.Errorf("warning %q does not say what to do", got)
			}
		})
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "brain test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePEM := func(path, typ string, b []byte) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: b}); err != nil {
			t.Fatal(err)
		}
	}
	writePEM(certFile, "CERTIFICATE", der)
	writePEM(keyFile, "PRIVATE KEY", kb)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

type hintFS struct{ FS handle.FS }
type hintBindings struct {
	Token string `json:"token"`
}

// TestAttachHints: an attach that lacks a handle or a binding value says
// how to give it — brain run's flag, or the config's key — from the
// kernel's own refusals.
func TestAttachHints(t *testing.T) {
	e := kernel.New(nil)
	if rec := e.Setup(context.Background()); len(rec.Failures) > 0 {
		t.Fatal(rec.Failures)
	}
	defer e.Close()
	needsFS := tool.New(tool.Spec{Name: "needs.fs", Description: "d"},
		func(*tool.Context[hintFS, tool.None], struct{}) (string, error) { return "", nil })
	needsToken := tool.New(tool.Spec{Name: "needs.token", Description: "d"},
		func(*tool.Context[tool.None, hintBindings], struct{}) (string, error) { return "", nil })
	rec := e.Attach(context.Background(), kernel.Attachment{Tool: needsFS}, kernel.Attachment{Tool: needsToken})
	if len(rec.Failures) != 2 {
		t.Fatalf("failures: %+v", rec.Failures)
	}
	want := map[string][2]string{
		"needs.fs":    {"--grants FILE", "the config's grants: file"},
		"needs.token": {"--binding NAME=JSON", "the config's bindings:"},
	}
	for _, f := range rec.Failures {
		if run, serve := attachHint(f, true), attachHint(f, false); !strings.Contains(run, want[f.Name][0]) || !strings.Contains(serve, want[f.Name][1]) {
			t.Errorf("%s (%s): hints %q and %q", f.Name, f.Reason, run, serve)
		}
	}
	if h := attachHint(kernel.Failure{Code: protocol.CodeInternal, Reason: "init: boom"}, true); h != "" {
		t.Errorf("a failure without a plain remedy got a hint: %q", h)
	}
}
