package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
)

func ptr[T any](v T) *T { return &v }

// TestIsUserInvokable follows the spec's resolution order: audience, then
// userInvokable, then the per-origin table.
func TestIsUserInvokable(t *testing.T) {
	o := func(k protocol.OriginKind, id string) protocol.Origin { return protocol.Origin{Kind: k, ID: id} }
	tests := []struct {
		name string
		cap  protocol.Capability
		want bool
	}{
		{"audience with user", protocol.Capability{Audience: []protocol.Audience{"llm", "user"}, Origin: o("client", "")}, true},
		{"audience without user", protocol.Capability{Audience: []protocol.Audience{"llm"}, UserInvokable: ptr(true), Origin: o("client", "")}, false},
		{"audience runtime only", protocol.Capability{Audience: []protocol.Audience{"runtime"}, Origin: o("mcp", "s"), Kind: "effect"}, false},
		{"empty audience is set", protocol.Capability{Audience: []protocol.Audience{}, UserInvokable: ptr(true), Origin: o("client", "")}, false},
		{"userInvokable true", protocol.Capability{UserInvokable: ptr(true), Origin: o("agent", "")}, true},
		{"userInvokable false beats mcp effect", protocol.Capability{UserInvokable: ptr(false), Origin: o("mcp", "s"), Kind: "effect"}, false},
		{"framework", protocol.Capability{Origin: o("framework", ""), Kind: "effect"}, false},
		{"client", protocol.Capability{Origin: o("client", ""), Kind: "effect"}, false},
		{"agent", protocol.Capability{Origin: o("agent", ""), Kind: "effect"}, false},
		{"flow", protocol.Capability{Origin: o("flow", "f"), Kind: "effect"}, false},
		{"connector", protocol.Capability{Origin: o("connector", "c"), Kind: "effect"}, false},
		{"mount", protocol.Capability{Origin: o("mount", "m"), Kind: "effect"}, false},
		{"app", protocol.Capability{Origin: o("app", "a"), Kind: "effect"}, false},
		{"mcp effect", protocol.Capability{Origin: o("mcp", "s"), Kind: "effect"}, true},
		{"mcp query", protocol.Capability{Origin: o("mcp", "s"), Kind: "query"}, false},
		{"mcp render", protocol.Capability{Origin: o("mcp", "s"), Kind: "render"}, false},
		{"mcp no kind", protocol.Capability{Origin: o("mcp", "s")}, false},
		{"skill effect", protocol.Capability{Origin: o("skill", "k"), Kind: "effect"}, true},
		{"skill render", protocol.Capability{Origin: o("skill", "k"), Kind: "render"}, true},
		{"skill query", protocol.Capability{Origin: o("skill", "k"), Kind: "query"}, false},
		{"skill no kind", protocol.Capability{Origin: o("skill", "k")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := protocol.IsUserInvokable(&tt.cap); got != tt.want {
				t.Errorf("IsUserInvokable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsRenderCapability(t *testing.T) {
	c := protocol.Capability{}
	if protocol.IsRenderCapability(&c) {
		t.Error("a capability without render is a render capability")
	}
	c.Render = &protocol.RenderSpec{}
	if !protocol.IsRenderCapability(&c) {
		t.Error("a capability with render is not a render capability")
	}
}

func TestHasAudienceDefault(t *testing.T) {
	c := protocol.Capability{}
	if !c.HasAudience(protocol.AudienceLLM) || !c.HasAudience(protocol.AudienceUser) || c.HasAudience(protocol.AudienceRuntime) {
		t.Error("an unset audience must mean llm and user, not runtime")
	}
	c.Audience = []protocol.Audience{protocol.AudienceRuntime}
	if c.HasAudience(protocol.AudienceLLM) || !c.HasAudience(protocol.AudienceRuntime) {
		t.Error("an explicit audience must be used as is")
	}
}

func TestCapabilityValidate(t *testing.T) {
	base := func() protocol.Capability {
		return protocol.Capability{Name: "a.b", Description: "d", InputSchema: json.RawMessage(`{}`),
			Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}}
	}
	render := func(mut func(*protocol.RenderSpec)) func(*protocol.Capability) {
		return func(c *protocol.Capability) {
			r := &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: "https://x.example/c.js", TagName: "x-c"}, Targets: []protocol.RenderTarget{"chat"}}
			mut(r)
			c.Render = r
		}
	}
	tests := []struct {
		name string
		mut  func(*protocol.Capability)
		want string // "" means valid
	}{
		{"valid", func(*protocol.Capability) {}, ""},
		{"valid render", render(func(*protocol.RenderSpec) {}), ""},
		{"empty name", func(c *protocol.Capability) { c.Name = "" }, "name: must not be empty"},
		{"name with space", func(c *protocol.Capability) { c.Name = "a b" }, "name: must not contain spaces"},
		{"long name", func(c *protocol.Capability) { c.Name = strings.Repeat("a", 300) }, "more than 256"},
		{"unknown side", func(c *protocol.Capability) { c.Side = "server" }, `side: unknown side "server"`},
		{"bad origin", func(c *protocol.Capability) { c.Origin = protocol.Origin{Kind: "app"} }, "origin.appId: required"},
		{"unknown scope", func(c *protocol.Capability) { c.Scope = "forever" }, `scope: unknown scope "forever"`},
		{"unknown kind", func(c *protocol.Capability) { c.Kind = "magic" }, `kind: unknown kind "magic"`},
		{"unknown audience", func(c *protocol.Capability) { c.Audience = []protocol.Audience{"llm", "admin"} }, `audience[1]: unknown audience "admin"`},
		{"schema not object", func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`true`) }, "inputSchema: must be a JSON object"},
		{"output schema not object", func(c *protocol.Capability) { c.OutputSchema = json.RawMessage(`[]`) }, "outputSchema: must be a JSON object"},
		{"zero timeout", func(c *protocol.Capability) { c.CallTimeoutMs = ptr(int64(0)) }, "callTimeoutMs: must be greater than 0"},
		{"negative timeout", func(c *protocol.Capability) { c.CallTimeoutMs = ptr(int64(-5)) }, "callTimeoutMs: must be greater than 0"},
		{"render no targets", render(func(r *protocol.RenderSpec) { r.Targets = nil }), "render.targets: at least one"},
		{"render bad target", render(func(r *protocol.RenderSpec) { r.Targets = []protocol.RenderTarget{"sidebar"} }), `render.targets[0]: unknown target "sidebar"`},
		{"render bad url", render(func(r *protocol.RenderSpec) { r.Source.URL = "javascript:alert(1)" }), "render.source.url"},
		{"render bad tag", render(func(r *protocol.RenderSpec) { r.Source.TagName = "chart" }), "render.source.tagName"},
		{"render bad kind", render(func(r *protocol.RenderSpec) { r.Source.Kind = "svg" }), `render.source.kind: unknown kind "svg"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mut(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestOptionalFieldsAbsent: an unset optional field is absent from the JSON,
// never null.
func TestOptionalFieldsAbsent(t *testing.T) {
	c := protocol.Capability{Name: "a", Description: "d", InputSchema: json.RawMessage(`{}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"a","description":"d","inputSchema":{},"side":"agent","origin":{"kind":"agent"}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestIsIdentifierCode(t *testing.T) {
	for s, want := range map[string]bool{"rate_limited": true, "a": true, "http.429": true, "": false, "Rate": false, "9x": false, "a b": false, strings.Repeat("a", 65): false} {
		if got := protocol.IsIdentifierCode(s); got != want {
			t.Errorf("IsIdentifierCode(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCallTimeoutMsIsANumber: the spec's callTimeoutMs is a number, so
// any JSON number decodes — a fraction rounded up to whole milliseconds
// (never a shorter wait than asked), an exponent, a number past what a
// timer holds taken as MaxCallTimeoutMs — and anything else, or a number
// not greater than 0, is an error naming the field.
func TestCallTimeoutMsIsANumber(t *testing.T) {
	decode := func(v string) (*int64, error) {
		var c protocol.Capability
		err := json.Unmarshal([]byte(`{"name":"a","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"},"callTimeoutMs":`+v+`}`), &c)
		return c.CallTimeoutMs, err
	}
	for in, want := range map[string]int64{
		"60000": 60000, "1500.5": 1501, "1500.0": 1500, "0.0001": 1, "1e-400": 1, "1e3": 1000, "2.5E1": 25,
		"9223372036854": protocol.MaxCallTimeoutMs, "9223372036855": protocol.MaxCallTimeoutMs,
		"9223372036854775807": protocol.MaxCallTimeoutMs, "1e30": protocol.MaxCallTimeoutMs, "1e400": protocol.MaxCallTimeoutMs,
	} {
		got, err := decode(in)
		if err != nil || got == nil || *got != want {
			t.Errorf("callTimeoutMs %s: %v, %v; want %d", in, got, err, want)
		}
	}
	if got, err := decode("null"); err != nil || got != nil {
		t.Errorf("callTimeoutMs null: %v, %v; want absent", got, err)
	}
	for _, in := range []string{"0", "-0", "-0.0", "0e5", "0.000e-3", "-1", "-0.5", "-1e400", "-1e-400", "0.0", `"1500"`, "true", "{}", "[1]"} {
		if _, err := decode(in); err == nil || !strings.Contains(err.Error(), "callTimeoutMs") {
			t.Errorf("callTimeoutMs %s: %v, want an error naming callTimeoutMs", in, err)
		}
	}
}

// TestValidateNameHidden: a name holds no character that is invisible or
// changes how its neighbours are shown, nor U+FFFD — what a lone
// surrogate decodes to, so that "x\ud800" and "x\udc00" would be one name.
func TestValidateNameHidden(t *testing.T) {
	for _, name := range []string{"fs.read", "github:search", "café", "café", "ui.Привет", "日本.検索", "ui.检索search", "αβγ.δ"} {
		if err := protocol.ValidateName(name); err != nil {
			t.Errorf("%+q refused: %v", name, err)
		}
	}
	for name, want := range map[string]string{
		"a\u00a0b":    "U+00A0",
		"a\u200bb":    "U+200B",
		"a\u202eb":    "U+202E",
		"\ufeffa":     "U+FEFF",
		"a\u00adb":    "U+00AD",
		"a\u2028b":    "U+2028",
		"a\u0085b":    "U+0085",
		"a\ufffdb":    "U+FFFD, the replacement character",
		"a\xffb":      "must be UTF-8",
		"a\u3000b":    "U+3000",
		"a\U000e0001": "U+E0001",
		"a\u034fb":    "U+034F",
		"a\u3164b":    "U+3164",
		"a\ufffeb":    "U+FFFE",
		"a\ufe0fb":    "U+FE0F",
		// Look-alikes: a word with letters of two scripts drawn alike.
		"fs.re\u0430d":      `the word "reаd" mixes Latin and Cyrillic letters`,
		"ui.\u03bfpen.x":    `the word "οpen" mixes Greek and Latin letters`,
		"ui.x\u0430\u0301b": `mixes Latin and Cyrillic`,
	} {
		if err := protocol.ValidateName(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+q: %v, want an error naming %s", name, err, want)
		}
	}
	// Over the wire: a lone surrogate in a registered name is refused, not
	// decoded to U+FFFD and registered under another name.
	f, err := protocol.DecodePeerFrame([]byte(`{"v":2,"id":"r","msg":{"type":"capability_register","capabilities":[{"name":"ui.\ud800x","description":"d","inputSchema":{},"side":"client","origin":{"kind":"client"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Msg.(*protocol.CapabilityRegister).Capabilities[0]
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "name: must not contain U+FFFD") {
		t.Fatalf("the lone surrogate's name: %v", err)
	}
}
