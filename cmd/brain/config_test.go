package main

import (
	"context"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeConfig writes a config and a grants file (fs and js over a temp
// workspace) into a temp dir and returns the config's path.
func writeConfig(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "grants.yaml"), []byte("workspace: ./workspace\nfs: {}\njs: {}\nnet: {allow_hosts: [api.example.com]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "brain.yaml")
	if err := os.WriteFile(p, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigErrors: a bad config is an error naming the file, line and key.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"unknown key", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    requireApproval: true\n",
			`brain.yaml:5:5: unknown field "requireApproval"`},
		{"wrong type", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    requiresApproval: maybe\n",
			`brain.yaml:5:23: policy[0].requiresApproval: want true or false, not maybe`},
		{"text for a number", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  sessions_per_token: lots\n",
			`brain.yaml:4:23: limits.sessions_per_token: want a whole number, not lots`},
		{"a fraction", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  sessions_per_token: 1.5\n",
			`brain.yaml:4:23: limits.sessions_per_token: want a whole number, not 1.5`},
		{"a fraction under 1", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  sessions_per_token: 0.5\n",
			`brain.yaml:4:23: limits.sessions_per_token: want a whole number, not 0.5`},
		{"a fraction in exponent form", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  sessions_per_token: 1e-1\n",
			`limits.sessions_per_token: want a whole number, not 1e-1`},
		{"a quoted number", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  sessions_per_token: \"1.5\"\n",
			`limits.sessions_per_token: want a whole number, not "1.5"`},
		{"text for a millisecond count", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    callTimeoutMs: \"soon\"\n",
			`brain.yaml:5:20: policy[0].callTimeoutMs: want a whole number, not "soon"`},
		{"text for a bool", "grants: ./grants.yaml\ntools: [fs.read]\napprovals:\n  require_digest: \"yes\"\n",
			`approvals.require_digest: want true or false, not "yes"`},
		{"text for a fraction", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  frames_per_second: \"fast\"\n",
			`limits.frames_per_second: want a number, not "fast"`},
		{"infinity for a fraction", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  frames_per_second: .inf\n",
			`limits.frames_per_second: want a number, not .inf`},
		{"a list for a number", "grants: ./grants.yaml\ntools: [fs.read]\nlimits:\n  frame_burst: [1]\n",
			`limits.frame_burst: want a whole number, not [1]`},
		{"a second document", "grants: ./grants.yaml\ntools: [fs.read]\n---\ntools: [js.eval]\n",
			`brain.yaml:3:1: a second YAML document (after ---)`},
		{"empty", "# nothing yet\n", `brain.yaml: the file has no settings`},
		{"no match", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - requiresApproval: true\n",
			`brain.yaml:4:5: policy[0]: match: a tool name or a glob`},
		{"bad glob", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: \"fs.[\"\n    requiresApproval: true\n",
			`brain.yaml:4:12: policy[0].match: "fs.[" is not a valid glob`},
		{"bad audience", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    audience: [llm, robot]\n",
			`brain.yaml:5:21: policy[0].audience[1]: unknown audience "robot" (want llm, user or runtime)`},
		{"audience twice", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    audience: [user, user]\n",
			`policy[0].audience[1]: "user" is listed twice`},
		{"empty audience", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    audience: []\n",
			`brain.yaml:5:15: policy[0].audience: must not be empty`},
		{"zero timeout", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    callTimeoutMs: 0\n",
			`brain.yaml:5:20: policy[0].callTimeoutMs: 0 is out of range`},
		{"huge timeout", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n    callTimeoutMs: 99999999999\n",
			`policy[0].callTimeoutMs: 99999999999 is out of range`},
		{"sets nothing", "grants: ./grants.yaml\ntools: [fs.read]\npolicy:\n  - match: fs.read\n",
			`brain.yaml:4:5: policy[0]: sets nothing`},
		{"unknown tool", "grants: ./grants.yaml\ntools: [fs.read, fs.raed]\n",
			`brain.yaml:2:18: tools[1]: no built-in tool "fs.raed"`},
		{"tool twice", "grants: ./grants.yaml\ntools: [fs.read, fs.read]\n",
			`brain.yaml:2:18: tools[1]: "fs.read" is listed twice`},
		{"no grants", "tools: [fs.read]\n", `brain.yaml: grants: a grants file is required for tools and artifacts`},
		{"a bare host as a browser origin", "browser_origins: [\"https://app.example.com\", app.example.com]\n",
			`brain.yaml:1:46: browser_origins[1]: "app.example.com" is not an origin: want scheme://host[:port]`},
		{"a path in a browser origin", "browser_origins: [\"https://app.example.com/ui\"]\n", `browser_origins[0]: "https://app.example.com/ui" is not an origin`},
		{"every site", "browser_origins: [\"*\"]\n", `browser_origins[0]: "*" would let every site in`},
		{"every site of a scheme", "browser_origins: [\"https://example.com\", \"https://*\"]\n", `browser_origins[1]: "https://*" would let every site of https in`},
		{"every site, twice wild", "browser_origins: [\"http://*.*:*\"]\n", `browser_origins[0]: "http://*.*:*" would let every site of http in`},
		{"every site under a top-level domain", "browser_origins: [\"https://*.com\"]\n", `browser_origins[0]: "https://*.com" would let every site under .com in`},
		{"every address", "browser_origins: [\"http://*.*.*.*:*\"]\n", `browser_origins[0]: "http://*.*.*.*:*" would let every address of http in`},
		{"every GitHub Pages site", "browser_origins: [\"https://*.github.io\"]\n", `browser_origins[0]: "https://*.github.io" would let every site under .github.io in`},
		{"a typo of *.example.com", "browser_origins: [\"https://*example.com\"]\n", `would let every site under .com in`},
		{"a socket's URL", "browser_origins: [\"ws://app.example.com\"]\n", `browser_origins[0]: "ws://app.example.com" is no origin a browser page sends`},
		{"a leading zero", "browser_origins: [\"https://app.example.com:08443\"]\n", `has no port 08443`},
		{"null", "browser_origins: [\"null\"]\n", `browser_origins[0]: "null" cannot be listed: every site's sandboxed iframes`},
		{"a port out of range", "browser_origins: [\"http://127.0.0.1:99999\"]\n", `browser_origins[0]: "http://127.0.0.1:99999" has no port 99999`},
		{"an unquoted wildcard", "browser_origins:\n  - *.example.com\n", `brain.yaml:2:5: YAML anchors and aliases are not allowed here (a value beginning with * is an alias to YAML: quote it, "*…")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadServeConfig(writeConfig(t, tt.config), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant %q", err, tt.want)
			}
		})
	}
}

// TestConfigTakesFractionsWhereWanted: frames_per_second takes a
// fraction, and a whole number may be written 2.0, 1e3, 0x10 or, quoted,
// "500" (as goccy always took it: configs written so keep working).
func TestConfigTakesFractionsWhereWanted(t *testing.T) {
	c, err := loadServeConfig(writeConfig(t, "limits:\n  frames_per_second: 0.5\n  frame_burst: 2.0\n  sessions_per_token: 1e3\n  capabilities_per_session: 0x10\n  pending_calls_per_session: \"500\"\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Limits; l.FramesPerSecond != 0.5 || l.FrameBurst != 2 || l.SessionsPerToken != 1000 || l.CapabilitiesPerSession != 16 || l.PendingCallsPerSession != 500 {
		t.Fatalf("limits %+v", l)
	}
}

// TestBrowserOriginPatterns: browser_origins become the server's Origin
// patterns as browsers send Origin — case folded, a trailing slash and a
// default port dropped, a Unicode name in punycode, a :* port matching no
// port too, an IPv6 literal's brackets escaped (path.Match reads them as
// a class), another scheme than http kept — and each matches what its
// entry says (server.TestBrowserOrigins has the server's side). An entry
// with a default port, or in Unicode, never matched.
func TestBrowserOriginPatterns(t *testing.T) {
	c, err := loadServeConfig(writeConfig(t, "browser_origins: [\"https://App.example.com/\", \"https://*.example.com\", \"http://localhost:*\", \"http://[::1]:8080\", \"https://app.example.org:443\", \"https://bücher.example\", \"chrome-extension://abcdefghij\", \"http://192.168.1.*:*\"]\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.browserOriginPatterns()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://app.example.com", "https://*.example.com", "http://localhost:*", "http://localhost", `http://\[::1\]:8080`, "https://app.example.org", "https://xn--bcher-kva.example", "chrome-extension://abcdefghij", "http://192.168.1.*:*", "http://192.168.1.*"}
	if !slices.Equal(got, want) {
		t.Fatalf("patterns %q, want %q", got, want)
	}
	for origin, ok := range map[string]bool{"https://app.example.com": true, "https://ui.example.com": true, "http://localhost:6274": true, "http://localhost": true, "http://[::1]:8080": true,
		"https://app.example.org": true, "https://xn--bcher-kva.example": true, "chrome-extension://abcdefghij": true, "http://192.168.1.20:8080": true,
		"http://app.example.com": false, "https://example.com.evil": false, "http://localhost.evil:1": false, "http://[::1]:8081": false, "https://app.example.org:8443": false} {
		matched := slices.ContainsFunc(got, func(p string) bool { m, _ := path.Match(p, origin); return m })
		if matched != ok {
			t.Errorf("%s matched: %v, want %v", origin, matched, ok)
		}
	}
}

// TestConfigPolicyMatchesNothing: a policy entry matching no tool stops the
// start, naming its line.
func TestConfigPolicyMatchesNothing(t *testing.T) {
	cfg, err := loadServeConfig(writeConfig(t, "grants: ./grants.yaml\ntools: [fs.read, fs.search]\npolicy:\n  - match: \"fs.*\"\n    requiresApproval: true\n  - match: fs.raed\n    displayName: Read\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = buildEnvironment(context.Background(), cfg, t.TempDir(), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `brain.yaml:6:12: policy[1].match: "fs.raed" matches none of this environment's tools [fs.read fs.search]`) {
		t.Fatalf("err = %v", err)
	}
}

// TestAttachReportsEveryFailure: every tool that fails to attach is in the
// error, each with its code and reason, not just the first.
func TestAttachReportsEveryFailure(t *testing.T) {
	// api.get lacks its bindings; exec.run needs the exec handle, which the
	// grants do not provide; fs.read attaches.
	cfg, err := loadServeConfig(writeConfig(t, "grants: ./grants.yaml\ntools: [api.get, fs.read, exec.run]\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = buildEnvironment(context.Background(), cfg, t.TempDir(), slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("attach succeeded")
	}
	msg := err.Error()
	for _, want := range []string{
		"attach: 2 of 3 tools failed",
		"\n  api.get: invalid_input: binding",
		"\n  exec.run: unavailable: requires [exec]",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "fs.read") {
		t.Errorf("error names fs.read, which attached:\n%s", msg)
	}
}

// TestConfigWithoutTools: a kernel config with no tools needs no grants and
// serves an empty environment.
func TestConfigWithoutTools(t *testing.T) {
	cfg, err := loadServeConfig(writeConfig(t, "tools: []\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, cleanup, err := buildEnvironment(context.Background(), cfg, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if n := len(env.Tools()); n != 0 {
		t.Errorf("%d tools", n)
	}
}

// TestExampleConfigsLoad: every config shipped in examples/ loads (the
// docs test runs them; this is the fast check).
func TestExampleConfigsLoad(t *testing.T) {
	for _, name := range []string{"approval.yaml", "kernel.yaml", "env.yaml", "artifacts.yaml", "chat.yaml"} {
		t.Run(name, func(t *testing.T) {
			if _, err := loadServeConfig(filepath.Join("..", "..", "examples", name), t.TempDir()); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, name := range []string{"approval.yaml", "env.yaml"} {
		t.Run(name+" attaches", func(t *testing.T) {
			cfg, err := loadServeConfig(filepath.Join("..", "..", "examples", name), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			_, cleanup, err := buildEnvironment(context.Background(), cfg, t.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			cleanup()
		})
	}
}

// TestMCPWithholdsUnaskable: brain mcp has nobody to ask for approval, so
// the tools whose policy requires it (or hides them from the model) are
// not served; the rest are.
func TestMCPWithholdsUnaskable(t *testing.T) {
	cfg, err := loadServeConfig(writeConfig(t, "grants: ./grants.yaml\ntools: [fs.read, fs.search, js.eval]\npolicy:\n  - match: \"fs.read\"\n    requiresApproval: true\n  - match: fs.search\n    audience: [user]\n  - match: js.eval\n    displayName: JS\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, cleanup, err := buildEnvironment(context.Background(), cfg, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	withheld := withholdUnaskable(env)
	if strings.Join(withheld, ",") != "fs.read,fs.search" {
		t.Errorf("withheld %v, want [fs.read fs.search]", withheld)
	}
	if got := toolList(env); len(got) != 1 || got[0] != "js.eval" {
		t.Errorf("served %v, want [js.eval]", got)
	}
}
