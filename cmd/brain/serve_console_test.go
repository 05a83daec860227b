package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestConsoleAddress(t *testing.T) {
	for _, tc := range []struct{ flag, kernel, want string }{
		{"", "127.0.0.1:7777", "127.0.0.1:7778"},
		{"", "0.0.0.0:443", "127.0.0.1:444"}, // loopback whatever --addr is
		{"", "127.0.0.1:0", "127.0.0.1:0"},
		{"", "not an address", "127.0.0.1:7778"},
		{"off", "127.0.0.1:7777", "off"},
		{"127.0.0.1:9000", "127.0.0.1:7777", "127.0.0.1:9000"},
	} {
		if got := consoleAddress(tc.flag, tc.kernel); got != tc.want {
			t.Errorf("consoleAddress(%q, %q) = %q, want %q", tc.flag, tc.kernel, got, tc.want)
		}
	}
}

func TestConsoleConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  consoleConfig
		want string
	}{
		{"origins", consoleConfig{FrameOrigins: []string{"https://charts.example.com", "http://127.0.0.1:9000/"}, WebComponentOrigins: []string{"https://w.example.com"}}, ""},
		{"a path", consoleConfig{FrameOrigins: []string{"https://charts.example.com/app"}}, "console.frame_origins[0]"},
		{"a scheme", consoleConfig{WebComponentOrigins: []string{"javascript:alert(1)"}}, "console.web_component_origins[0]"},
		{"no host", consoleConfig{WebComponentOrigins: []string{"https://"}}, "not an origin"},
		{"credentials", consoleConfig{FrameOrigins: []string{"https://u:p@x.example.com"}}, "not an origin"},
		{"hosts", consoleConfig{Hosts: []string{"console.example.com", "brain-1"}}, ""},
		{"a host with a port", consoleConfig{Hosts: []string{"console.example.com:443"}}, "console.hosts[0]"},
		{"a host with a scheme", consoleConfig{Hosts: []string{"ok.example.com", "https://console.example.com"}}, "console.hosts[1]"},
		{"an empty host", consoleConfig{Hosts: []string{""}}, "not a host name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestConsoleSignInSurvivesRestart: a console sign-in is good after brain
// serve restarts on the same data directory (the cookie is sealed with
// data/console.key), so an open console reconnects by itself; after a
// restart with the operator token removed from tokens.json it is not.
func TestConsoleSignInSurvivesRestart(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("workspace", 0o755); err != nil {
		t.Fatal(err)
	}
	consoleOf := func(out string) string {
		m := regexp.MustCompile(`console: (http://[0-9.:]+)/`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no console address in:\n%s", out)
		}
		return m[1]
	}
	start := func() (string, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		_, out, done := serveInProcess(t, ctx, serveArgs{addr: "127.0.0.1:0", data: "data", idle: time.Hour})
		c := consoleOf(out.String())
		return c, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	}
	operator := func() string {
		raw, err := os.ReadFile(filepath.Join("data", "tokens.json"))
		if err != nil {
			t.Fatal(err)
		}
		var tf struct {
			Tokens []struct{ Token, Side string }
		}
		if err := json.Unmarshal(raw, &tf); err != nil {
			t.Fatal(err)
		}
		for _, tk := range tf.Tokens {
			if tk.Side == "operator" {
				return tk.Token
			}
		}
		t.Fatal("no operator token")
		return ""
	}
	var cookie *http.Cookie
	var csrf string
	signIn := func(base, token string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/console/signin", strings.NewReader(`{"token":"`+token+`"}`))
		req.Header.Set("Origin", base)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ CSRF string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		for _, c := range resp.Cookies() {
			if c.Name == "brain_console" {
				cookie = c
			}
		}
		if resp.StatusCode != http.StatusOK || cookie == nil || body.CSRF == "" {
			t.Fatalf("sign-in: %d, cookie %v", resp.StatusCode, cookie)
		}
		csrf = body.CSRF
	}
	me := func(base string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/console/me", nil)
		req.AddCookie(cookie)
		req.Header.Set("X-Brain-Csrf", csrf)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	c1, stop := start()
	signIn(c1, operator())
	stop()
	fi, err := os.Stat(filepath.Join("data", "console.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("data/console.key: %v %v", fi, err)
	}

	c2, stop := start()
	if code, body := me(c2); code != http.StatusOK || !strings.Contains(body, `"operator"`) {
		stop()
		t.Fatalf("after a restart: %d %s", code, body)
	}
	stop()

	// Revoke: the operator token out of tokens.json, then a restart.
	raw, err := os.ReadFile(filepath.Join("data", "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tf map[string][]map[string]any
	if err := json.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	var kept []map[string]any
	for _, tk := range tf["tokens"] {
		if tk["side"] != "operator" {
			kept = append(kept, tk)
		}
	}
	tf["tokens"] = kept
	out, _ := json.Marshal(tf)
	if err := os.WriteFile(filepath.Join("data", "tokens.json"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	c3, stop := start()
	defer stop()
	if code, body := me(c3); code != http.StatusUnauthorized {
		t.Fatalf("after revoking the operator token and a restart: %d %s, want 401", code, body)
	}
}
