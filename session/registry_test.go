package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// wantRejected checks that err is a *session.RegisterError naming name with
// code, whose message mentions rule, and that the session did not change.
func wantRejected(t *testing.T, s *session.Session, before string, err error, name string, code protocol.Code, rule string) {
	t.Helper()
	var re *session.RegisterError
	if !errors.As(err, &re) {
		t.Fatalf("got error %v (%T), want a *session.RegisterError", err, err)
	}
	if re.Name != name {
		t.Errorf("RegisterError.Name = %q, want %q", re.Name, name)
	}
	if re.Code != code || re.ErrorCode() != code {
		t.Errorf("RegisterError code = %s, want %s (%v)", re.Code, code, err)
	}
	named := fmt.Sprintf("%q", name)
	if len(name) > protocol.MaxNameBytes { // the error names a name too long by its first bytes
		named = fmt.Sprintf("%q", name[:protocol.MaxNameBytes]+"…")
	}
	if !strings.Contains(err.Error(), named) {
		t.Errorf("error %q does not name the capability %q", err, name)
	}
	if !strings.Contains(err.Error(), rule) {
		t.Errorf("error %q does not mention the rule %q", err, rule)
	}
	if after := state(t, s); after != before {
		t.Errorf("a rejected registration changed the session:\nbefore %s\nafter  %s", before, after)
	}
}

func TestRegisterValidation(t *testing.T) {
	bad := func(f func(*protocol.Capability)) protocol.Capability {
		c := clientCap("tool.bad")
		f(&c)
		return c
	}
	render := func() *protocol.RenderSpec {
		return &protocol.RenderSpec{
			Source:  protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: "https://cdn.example/ui.js", TagName: "ui-card"},
			Targets: []protocol.RenderTarget{protocol.TargetChat},
		}
	}
	tests := []struct {
		name string
		cap  protocol.Capability
		rule string // what the error must say
	}{
		{"empty name", bad(func(c *protocol.Capability) { c.Name = "" }), "name: must not be empty"},
		{"name with a space", bad(func(c *protocol.Capability) { c.Name = "tool bad" }), "name: must not contain spaces"},
		{"name too long", bad(func(c *protocol.Capability) { c.Name = strings.Repeat("n", protocol.MaxNameBytes+1) }), "name:"},
		{"unknown side", bad(func(c *protocol.Capability) { c.Side = "server" }), "side: unknown side"},
		{"unknown scope", bad(func(c *protocol.Capability) { c.Scope = "forever" }), "scope: unknown scope"},
		{"unknown kind", bad(func(c *protocol.Capability) { c.Kind = "magic" }), "kind: unknown kind"},
		{"unknown audience", bad(func(c *protocol.Capability) { c.Audience = []protocol.Audience{"llm", "admin"} }), `audience[1]: unknown audience "admin"`},
		{"origin without its id", bad(func(c *protocol.Capability) { c.Origin = protocol.Origin{Kind: protocol.OriginApp} }), "origin.appId: required"},
		{"unknown origin kind", bad(func(c *protocol.Capability) { c.Origin = protocol.Origin{Kind: "plugin"} }), "origin.kind: unknown kind"},
		{"callTimeoutMs zero", bad(func(c *protocol.Capability) { c.CallTimeoutMs = ms(0) }), "callTimeoutMs: must be greater than 0"},
		{"callTimeoutMs negative", bad(func(c *protocol.Capability) { c.CallTimeoutMs = ms(-50) }), "callTimeoutMs: must be greater than 0"},
		{"inputSchema missing", bad(func(c *protocol.Capability) { c.InputSchema = nil }), "inputSchema: must be a JSON object"},
		{"inputSchema true", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`true`) }), "inputSchema: must be a JSON object"},
		{"inputSchema array", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`[{"type":"object"}]`) }), "inputSchema: must be a JSON object"},
		{"inputSchema string", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`"object"`) }), "inputSchema: must be a JSON object"},
		{"inputSchema not JSON", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`{"type":`) }), "inputSchema: schema is not JSON"},
		{"inputSchema unknown type", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`{"type":"nope"}`) }), "inputSchema:"},
		{"inputSchema bad regex", bad(func(c *protocol.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`)
		}), "is not valid regex"},
		{"inputSchema negative minLength", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`{"type":"string","minLength":-1}`) }), "inputSchema:"},
		{"inputSchema dangling $ref", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`{"$ref":"#/$defs/missing"}`) }), "inputSchema:"},
		{"inputSchema too large", bad(func(c *protocol.Capability) {
			c.InputSchema = json.RawMessage(`{"description":"` + strings.Repeat("x", session.MaxSchemaBytes) + `"}`)
		}), "more than"},
		{"inputSchema $ref cycle", bad(func(c *protocol.Capability) {
			c.InputSchema = json.RawMessage(`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`)
		}), "its $refs form a cycle"},
		{"inputSchema $ref to itself", bad(func(c *protocol.Capability) { c.InputSchema = json.RawMessage(`{"$ref":"#"}`) }), "its $refs form a cycle"},
		{"inputSchema nested too deep", bad(func(c *protocol.Capability) { c.InputSchema = nestedSchema(5000) }), "nests more than 128 levels deep"},
		{"outputSchema nested too deep", bad(func(c *protocol.Capability) { c.OutputSchema = nestedSchema(session.MaxSchemaDepth) }), "outputSchema: schema nests more than"},
		{"outputSchema false", bad(func(c *protocol.Capability) { c.OutputSchema = json.RawMessage(`false`) }), "outputSchema: must be a JSON object"},
		{"outputSchema unknown type", bad(func(c *protocol.Capability) { c.OutputSchema = json.RawMessage(`{"type":"nope"}`) }), "outputSchema:"},
		{"outputSchema not JSON", bad(func(c *protocol.Capability) { c.OutputSchema = json.RawMessage(`{]`) }), "outputSchema:"},
		{"render tag without hyphen", bad(func(c *protocol.Capability) { c.Render = render(); c.Render.Source.TagName = "card" }), "render.source.tagName"},
		{"render javascript url", bad(func(c *protocol.Capability) { c.Render = render(); c.Render.Source.URL = "javascript:alert(1)" }), "render.source.url"},
		{"render relative url", bad(func(c *protocol.Capability) { c.Render = render(); c.Render.Source.URL = "/ui.js" }), "render.source.url"},
		{"render no targets", bad(func(c *protocol.Capability) { c.Render = render(); c.Render.Targets = nil }), "render.targets: at least one"},
		{"render unknown target", bad(func(c *protocol.Capability) {
			c.Render = render()
			c.Render.Targets = []protocol.RenderTarget{"sidebar"}
		}), "render.targets[0]"},
		{"render unknown source", bad(func(c *protocol.Capability) { c.Render = render(); c.Render.Source.Kind = "canvas" }), "render.source.kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			if err := s.Register(session.Client, clientCap("tool.good")); err != nil {
				t.Fatal(err)
			}
			before := state(t, s)
			err := s.Register(session.Client, tt.cap)
			wantRejected(t, s, before, err, tt.cap.Name, protocol.CodeInvalidRequest, tt.rule)
		})
	}
}

// TestRegisterRefusesExternalRefs: a schema from the wire must not make the
// kernel read a file or fetch a URL. Each referenced resource exists and is
// a valid schema, so a schema that loaded it would compile; the server and
// the file prove nothing was read.
func TestRegisterRefusesExternalRefs(t *testing.T) {
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write([]byte(`{"type":"object"}`))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	refs := []struct {
		name   string
		schema string
	}{
		{"file passwd", `{"$ref":"file:///etc/passwd"}`},
		{"file that is a schema", `{"$ref":"file://` + file + `"}`},
		{"http", `{"$ref":"` + srv.URL + `/s.json"}`},
		{"https", `{"$ref":"https://schemas.example/s.json"}`},
		{"nested http", `{"type":"object","properties":{"a":{"$ref":"` + srv.URL + `/a.json"}}}`},
		{"$schema on a server", `{"$schema":"` + srv.URL + `/meta","type":"object"}`},
		{"relative to an http $id", `{"$id":"` + srv.URL + `/root.json","$ref":"other.json"}`},
		{"relative", `{"$ref":"other.json"}`},
		{"absolute path", `{"$ref":"/etc/passwd"}`},
		{"network path", `{"$ref":"//schemas.example/s.json"}`},
		{"$dynamicRef", `{"$dynamicRef":"` + srv.URL + `/d.json"}`},
	}
	for _, field := range []string{"inputSchema", "outputSchema"} {
		for _, ref := range refs {
			t.Run(field+"/"+ref.name, func(t *testing.T) {
				s := session.New("test", nil)
				before := state(t, s)
				c := clientCap("tool.ref")
				if field == "inputSchema" {
					c.InputSchema = json.RawMessage(ref.schema)
				} else {
					c.OutputSchema = json.RawMessage(ref.schema)
				}
				err := s.Register(session.Client, c)
				wantRejected(t, s, before, err, "tool.ref", protocol.CodeInvalidRequest, field+":")
				if !strings.Contains(err.Error(), "is not allowed: schemas must be self-contained") {
					t.Errorf("error %q does not say that external references are refused", err)
				}
			})
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the schema server was fetched %d times, want 0", n)
	}
}

// TestRegisterAcceptsSelfContainedSchemas: references inside the schema,
// embedded resources and the draft meta-schemas resolve without loading.
func TestRegisterAcceptsSelfContainedSchemas(t *testing.T) {
	schemas := map[string]string{
		"local $defs":         `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`,
		"embedded $id":        `{"$defs":{"a":{"$id":"inner.json","type":"object"}},"$ref":"inner.json"}`,
		"http $id, local ref": `{"$id":"https://schemas.example/a.json","type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`,
		"2020-12 $schema":     `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`,
		"draft-07 $schema":    `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
		"empty":               `{}`,
	}
	for name, schema := range schemas {
		t.Run(name, func(t *testing.T) {
			s := session.New("test", nil)
			c := clientCap("tool.ok")
			c.InputSchema = json.RawMessage(schema)
			c.OutputSchema = json.RawMessage(schema)
			if err := s.Register(session.Client, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRegisterTrust: the registering side must match the origin kind and
// the side; framework is built in.
func TestRegisterTrust(t *testing.T) {
	type registrar func(s *session.Session, c protocol.Capability) error
	viaPeer := func(p session.Peer) registrar {
		return func(s *session.Session, c protocol.Capability) error { return s.Register(p, c) }
	}
	client, calendar := viaPeer(session.Client), viaPeer(session.App("calendar"))
	runtime := func(s *session.Session, c protocol.Capability) error { return s.RegisterAgent(c, echo) }
	withSide := func(c protocol.Capability, side protocol.Side) protocol.Capability { c.Side = side; return c }
	withOrigin := func(c protocol.Capability, kind protocol.OriginKind, id string) protocol.Capability {
		c.Origin = protocol.Origin{Kind: kind, ID: id}
		return c
	}
	framework := protocol.Origin{Kind: protocol.OriginFramework}
	tests := []struct {
		name     string
		register registrar
		cap      protocol.Capability
		code     protocol.Code // "" means accepted
		rule     string
	}{
		{"client registers client", client, clientCap("c.ok"), "", ""},
		{"client registers origin agent", client, withOrigin(clientCap("c.x"), protocol.OriginAgent, ""), protocol.CodeForbidden, `a client may only register origin kind "client"`},
		{"client registers origin app", client, withOrigin(clientCap("c.x"), protocol.OriginApp, "calendar"), protocol.CodeForbidden, `not "app"`},
		{"client registers origin flow", client, withOrigin(clientCap("c.x"), protocol.OriginFlow, "f1"), protocol.CodeForbidden, `not "flow"`},
		{"client registers side agent", client, withSide(clientCap("c.x"), protocol.SideAgent), protocol.CodeForbidden, `a client may only register side "client"`},
		{"client registers side app", client, withSide(clientCap("c.x"), protocol.SideApp), protocol.CodeForbidden, `not "app"`},
		{"client registers framework", client, withOrigin(clientCap("c.x"), protocol.OriginFramework, ""), protocol.CodeForbidden, "built in"},

		{"app registers its own", calendar, appCap("calendar", "cal.ok"), "", ""},
		{"app registers another app's", calendar, appCap("mail", "cal.x"), protocol.CodeForbidden, `app "calendar" may only register origin {kind: app, appId: "calendar"}`},
		{"app registers origin client", calendar, withOrigin(appCap("calendar", "cal.x"), protocol.OriginClient, ""), protocol.CodeForbidden, "may only register origin"},
		{"app registers origin agent", calendar, withOrigin(appCap("calendar", "cal.x"), protocol.OriginAgent, ""), protocol.CodeForbidden, "may only register origin"},
		{"app registers side client", calendar, withSide(appCap("calendar", "cal.x"), protocol.SideClient), protocol.CodeForbidden, `an app may only register side "app"`},
		{"app registers side agent", calendar, withSide(appCap("calendar", "cal.x"), protocol.SideAgent), protocol.CodeForbidden, `an app may only register side "app"`},
		{"app registers framework", calendar, newCap("cal.x", protocol.SideApp, framework), protocol.CodeForbidden, "built in"},

		{"runtime registers agent", runtime, agentCap("r.agent"), "", ""},
		{"runtime registers flow", runtime, withOrigin(agentCap("r.flow"), protocol.OriginFlow, "f1"), "", ""},
		{"runtime registers skill", runtime, withOrigin(agentCap("r.skill"), protocol.OriginSkill, "s1"), "", ""},
		{"runtime registers mcp", runtime, withOrigin(agentCap("r.mcp"), protocol.OriginMCP, "m1"), "", ""},
		{"runtime registers connector", runtime, withOrigin(agentCap("r.conn"), protocol.OriginConnector, "pg"), "", ""},
		{"runtime registers mount", runtime, withOrigin(agentCap("r.mount"), protocol.OriginMount, "home"), "", ""},
		{"runtime registers origin client", runtime, withOrigin(agentCap("r.x"), protocol.OriginClient, ""), protocol.CodeForbidden, `the runtime may not register origin kind "client"`},
		{"runtime registers origin app", runtime, withOrigin(agentCap("r.x"), protocol.OriginApp, "calendar"), protocol.CodeForbidden, `origin kind "app"`},
		{"runtime registers side client", runtime, withSide(agentCap("r.x"), protocol.SideClient), protocol.CodeForbidden, `the runtime may only register side "agent"`},
		{"runtime registers side app", runtime, withSide(agentCap("r.x"), protocol.SideApp), protocol.CodeForbidden, `the runtime may only register side "agent"`},
		{"runtime registers framework", runtime, newCap("r.x", protocol.SideAgent, framework), protocol.CodeForbidden, "built in"},
		{"runtime through Register", viaPeer(session.Runtime), agentCap("r.x"), protocol.CodeInvalidRequest, "RegisterAgent"},
		{"runtime with a nil handler", func(s *session.Session, c protocol.Capability) error { return s.RegisterAgent(c, nil) },
			agentCap("r.x"), protocol.CodeInvalidRequest, "handler is nil"},
		{"unknown peer side", viaPeer(session.Peer{Side: "framework"}), clientCap("c.x"), protocol.CodeForbidden, "unknown peer side"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			before, seq := state(t, s), s.LastSeq()
			err := tt.register(s, tt.cap)
			if tt.code != "" {
				wantRejected(t, s, before, err, tt.cap.Name, tt.code, tt.rule)
				return
			}
			if err != nil {
				t.Fatalf("Register: %v", err)
			}
			got, ok := s.Lookup(tt.cap.Name)
			if !ok || got.Origin != tt.cap.Origin {
				t.Fatalf("Lookup(%q) = %+v, %v after registering", tt.cap.Name, got, ok)
			}
			evs := eventsAfter(t, s, seq)
			regs := only[*protocol.CapabilityRegister](evs)
			if len(evs) != 1 || len(regs) != 1 || !slices.Equal(names(regs[0].Capabilities), []string{tt.cap.Name}) {
				t.Fatalf("events after registering: %s, want one capability_register naming %q", jsonOf(t, evs), tt.cap.Name)
			}
		})
	}
}

// TestRegisterNameConflicts: a name is unique in the session; only the
// origin that holds it may replace it.
func TestRegisterNameConflicts(t *testing.T) {
	type registrar func(s *session.Session) error
	client := func(s *session.Session) error { return s.Register(session.Client, clientCap("shared")) }
	app := func(id string) registrar {
		return func(s *session.Session) error { return s.Register(session.App(id), appCap(id, "shared")) }
	}
	agent := func(s *session.Session) error { return s.RegisterAgent(agentCap("shared"), echo) }
	flow := func(id string) registrar {
		return func(s *session.Session) error {
			c := agentCap("shared")
			c.Origin = protocol.Origin{Kind: protocol.OriginFlow, ID: id}
			return s.RegisterAgent(c, echo)
		}
	}
	tests := []struct {
		name          string
		holder, other registrar
		holderOrigin  string
	}{
		{"app after client", client, app("calendar"), "client"},
		{"runtime after client", client, agent, "client"},
		{"client after app", app("calendar"), client, "app/calendar"},
		{"other app after app", app("calendar"), app("mail"), "app/calendar"},
		{"client after runtime", agent, client, "agent"},
		{"other flow after flow", flow("f1"), flow("f2"), "flow/f1"},
		{"agent after flow", flow("f1"), agent, "flow/f1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			if err := tt.holder(s); err != nil {
				t.Fatal(err)
			}
			before := state(t, s)
			err := tt.other(s)
			wantRejected(t, s, before, err, "shared", protocol.CodeConflict, "registered by origin "+tt.holderOrigin)
		})
	}
}

// TestRegisterReplaces: re-registering a name from the same origin replaces
// it, with a new capability_register event; a call in flight finishes with
// the registration it started with.
func TestRegisterReplaces(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		s := session.New("test", nil)
		c := clientCap("platform.react")
		if err := s.Register(session.Client, c); err != nil {
			t.Fatal(err)
		}
		seq := s.LastSeq()
		c.Description = "Replaced."
		if err := s.Register(session.Client, c); err != nil {
			t.Fatalf("re-register from the same origin: %v", err)
		}
		if got, _ := s.Lookup("platform.react"); got.Description != "Replaced." {
			t.Errorf("description after replacing = %q", got.Description)
		}
		regs := only[*protocol.CapabilityRegister](eventsAfter(t, s, seq))
		if len(regs) != 1 || regs[0].Capabilities[0].Description != "Replaced." {
			t.Errorf("replacement events: %s", jsonOf(t, regs))
		}
	})
	t.Run("agent in flight", func(t *testing.T) {
		s := session.New("test", nil)
		old := newGate(false)
		c := agentCap("tool")
		c.Origin = protocol.Origin{Kind: protocol.OriginFlow, ID: "f1"}
		if err := s.RegisterAgent(c, old); err != nil {
			t.Fatal(err)
		}
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.Invoke(context.Background(), protocol.AudienceLLM, "tool", textInput) }()
		recv(t, old.started, "the first handler to start")
		if err := s.RegisterAgent(c, returns(`"new"`, nil)); err != nil {
			t.Fatalf("replace: %v", err)
		}
		wantValue(t, s.Invoke(context.Background(), protocol.AudienceLLM, "tool", textInput), `"new"`)
		close(old.release)
		wantValue(t, recv(t, done, "the call in flight"), `"released"`)
	})
}

// TestRegisterAllOrNothing: a batch that breaks any rule changes nothing,
// not even its valid capabilities.
func TestRegisterAllOrNothing(t *testing.T) {
	badSchema := clientCap("c.bad")
	badSchema.InputSchema = json.RawMessage(`{"type":"nope"}`)
	tests := []struct {
		name  string
		setup []protocol.Capability // registered first, by the client
		batch []protocol.Capability
		bad   string
		code  protocol.Code
		rule  string
	}{
		{name: "last capability bad", batch: []protocol.Capability{clientCap("c.a"), clientCap("c.b"), badSchema},
			bad: "c.bad", code: protocol.CodeInvalidRequest, rule: "inputSchema"},
		{name: "last capability forbidden", batch: []protocol.Capability{clientCap("c.a"), clientCap("c.b"), appCap("calendar", "c.app")},
			bad: "c.app", code: protocol.CodeForbidden, rule: "may only register origin kind"},
		{name: "name twice", batch: []protocol.Capability{clientCap("c.a"), clientCap("c.b"), clientCap("c.a")},
			bad: "c.a", code: protocol.CodeInvalidRequest, rule: "appears twice"},
		{name: "last name taken by another origin", setup: nil,
			batch: []protocol.Capability{clientCap("c.a"), clientCap(session.CapabilitiesListName)},
			bad:   session.CapabilitiesListName, code: protocol.CodeConflict, rule: "registered by origin framework"},
		{name: "bad replacement keeps the old", setup: []protocol.Capability{clientCap("c.bad")},
			batch: []protocol.Capability{clientCap("c.a"), badSchema},
			bad:   "c.bad", code: protocol.CodeInvalidRequest, rule: "inputSchema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			if len(tt.setup) > 0 {
				if err := s.Register(session.Client, tt.setup...); err != nil {
					t.Fatal(err)
				}
			}
			before, seq := state(t, s), s.LastSeq()
			err := s.Register(session.Client, tt.batch...)
			wantRejected(t, s, before, err, tt.bad, tt.code, tt.rule)
			if s.LastSeq() != seq {
				t.Errorf("LastSeq moved from %d to %d", seq, s.LastSeq())
			}
			if _, ok := s.Lookup("c.a"); ok {
				t.Errorf("c.a, valid but in a rejected batch, was registered")
			}
		})
	}
	t.Run("a good batch is one event", func(t *testing.T) {
		s := session.New("test", nil)
		seq := s.LastSeq()
		if err := s.Register(session.Client, clientCap("c.b"), clientCap("c.a"), clientCap("c.c")); err != nil {
			t.Fatal(err)
		}
		evs := eventsAfter(t, s, seq)
		regs := only[*protocol.CapabilityRegister](evs)
		if len(evs) != 1 || len(regs) != 1 || !slices.Equal(names(regs[0].Capabilities), []string{"c.b", "c.a", "c.c"}) {
			t.Fatalf("events: %s", jsonOf(t, evs))
		}
	})
	t.Run("an empty batch changes nothing", func(t *testing.T) {
		s := session.New("test", nil)
		before := state(t, s)
		if err := s.Register(session.Client); err != nil {
			t.Fatal(err)
		}
		if after := state(t, s); after != before {
			t.Errorf("an empty batch changed the session: %s", after)
		}
	})
}

// TestBuiltinIsProtected: nobody registers, replaces or deregisters
// __capabilities.list.
func TestBuiltinIsProtected(t *testing.T) {
	list := session.CapabilitiesListName
	tests := []struct {
		name string
		do   func(s *session.Session) error
		code protocol.Code
	}{
		{"client replaces", func(s *session.Session) error { return s.Register(session.Client, clientCap(list)) }, protocol.CodeConflict},
		{"app replaces", func(s *session.Session) error { return s.Register(session.App("a"), appCap("a", list)) }, protocol.CodeConflict},
		{"runtime replaces", func(s *session.Session) error { return s.RegisterAgent(agentCap(list), echo) }, protocol.CodeConflict},
		{"runtime replaces as framework", func(s *session.Session) error {
			return s.RegisterAgent(newCap(list, protocol.SideAgent, protocol.Origin{Kind: protocol.OriginFramework}), echo)
		}, protocol.CodeForbidden},
		{"client deregisters", func(s *session.Session) error { return s.Deregister(session.Client, list) }, protocol.CodeForbidden},
		{"app deregisters", func(s *session.Session) error { return s.Deregister(session.App("a"), list) }, protocol.CodeForbidden},
		{"runtime deregisters", func(s *session.Session) error { return s.Deregister(session.Runtime, list) }, protocol.CodeForbidden},
		{"a peer claiming to be the framework deregisters", func(s *session.Session) error {
			return s.Deregister(session.Peer{Side: "framework"}, list)
		}, protocol.CodeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("test", nil)
			before := state(t, s)
			err := tt.do(s)
			wantRejected(t, s, before, err, list, tt.code, "")
		})
	}
	t.Run("EndTurn keeps it", func(t *testing.T) {
		s := session.New("test", nil)
		s.EndTurn(protocol.TurnCompleted, "")
		if _, ok := s.Lookup(list); !ok {
			t.Fatal("EndTurn dropped the built-in")
		}
	})
	t.Run("it is built in", func(t *testing.T) {
		s := session.New("test", nil)
		c, ok := s.Lookup(list)
		if !ok || c.Origin.Kind != protocol.OriginFramework || c.Side != protocol.SideAgent {
			t.Fatalf("Lookup(%q) = %+v, %v", list, c, ok)
		}
		if s.LastSeq() != 0 {
			t.Errorf("a new session's LastSeq = %d, want 0: built-ins emit no event", s.LastSeq())
		}
	})
}

func TestDeregister(t *testing.T) {
	setup := func(t *testing.T) *session.Session {
		s := session.New("test", nil)
		if err := s.Register(session.Client, clientCap("c.one"), clientCap("c.two")); err != nil {
			t.Fatal(err)
		}
		if err := s.Register(session.App("calendar"), appCap("calendar", "cal.one")); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterAgent(agentCap("a.one"), echo); err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name    string
		peer    session.Peer
		names   []string
		code    protocol.Code // "" means no error
		removed []string      // what the event names; nil means no event
	}{
		{name: "unknown names are ignored", peer: session.Client, names: []string{"nope", "c.nope"}},
		{name: "no names", peer: session.Client},
		{name: "own names", peer: session.Client, names: []string{"c.two", "c.one"}, removed: []string{"c.two", "c.one"}},
		{name: "own and unknown", peer: session.Client, names: []string{"nope", "c.one"}, removed: []string{"c.one"}},
		{name: "a name twice", peer: session.Client, names: []string{"c.one", "c.one"}, removed: []string{"c.one"}},
		{name: "app its own", peer: session.App("calendar"), names: []string{"cal.one"}, removed: []string{"cal.one"}},
		{name: "runtime its own", peer: session.Runtime, names: []string{"a.one"}, removed: []string{"a.one"}},
		{name: "client the app's", peer: session.Client, names: []string{"c.one", "cal.one"}, code: protocol.CodeForbidden},
		{name: "client the runtime's", peer: session.Client, names: []string{"a.one"}, code: protocol.CodeForbidden},
		{name: "app the client's", peer: session.App("calendar"), names: []string{"cal.one", "c.one"}, code: protocol.CodeForbidden},
		{name: "other app the app's", peer: session.App("mail"), names: []string{"cal.one"}, code: protocol.CodeForbidden},
		{name: "runtime the client's", peer: session.Runtime, names: []string{"a.one", "c.one"}, code: protocol.CodeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			before, seq := state(t, s), s.LastSeq()
			err := s.Deregister(tt.peer, tt.names...)
			if tt.code != "" {
				wantErrCode(t, err, tt.code)
				if !strings.HasPrefix(err.Error(), "deregister ") {
					t.Errorf("a refused deregister says %q, want it to name the deregister", err)
				}
				if after := state(t, s); after != before {
					t.Errorf("a refused deregister changed the session:\nbefore %s\nafter  %s", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("Deregister: %v", err)
			}
			evs := eventsAfter(t, s, seq)
			if tt.removed == nil {
				if len(evs) != 0 || state(t, s) != before {
					t.Fatalf("deregistering nothing registered emitted %s or changed the session", jsonOf(t, evs))
				}
				return
			}
			deregs := only[*protocol.CapabilityDeregister](evs)
			if len(evs) != 1 || len(deregs) != 1 || !slices.Equal(deregs[0].Names, tt.removed) {
				t.Fatalf("events %s, want one capability_deregister naming %q", jsonOf(t, evs), tt.removed)
			}
			for _, n := range tt.removed {
				if _, ok := s.Lookup(n); ok {
					t.Errorf("%q is still registered", n)
				}
			}
		})
	}
}

func TestEndTurn(t *testing.T) {
	s := session.New("test", nil)
	turnCap := func(c protocol.Capability) protocol.Capability { c.Scope = protocol.ScopeTurn; return c }
	sessionCap := func(c protocol.Capability) protocol.Capability { c.Scope = protocol.ScopeSession; return c }
	if err := s.Register(session.Client, turnCap(clientCap("t.b")), clientCap("s.default"), sessionCap(clientCap("s.explicit"))); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterAgent(turnCap(agentCap("t.a")), echo); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(session.App("calendar"), turnCap(appCap("calendar", "t.c"))); err != nil {
		t.Fatal(err)
	}
	if s.Turn() != 0 {
		t.Fatalf("Turn() = %d before the first EndTurn, want 0", s.Turn())
	}
	seq := s.LastSeq()
	if got := s.EndTurn(protocol.TurnCompleted, ""); got != 1 || s.Turn() != 1 {
		t.Fatalf("EndTurn() = %d, Turn() = %d, want 1", got, s.Turn())
	}
	evs := eventsAfter(t, s, seq)
	deregs := only[*protocol.CapabilityDeregister](evs)
	if len(evs) != 2 || len(deregs) != 1 || !slices.Equal(deregs[0].Names, []string{"t.a", "t.b", "t.c"}) {
		t.Fatalf("EndTurn emitted %s, want one capability_deregister naming t.a, t.b, t.c, then turn_ended", jsonOf(t, evs))
	}
	want := []string{session.CapabilitiesListName, "s.default", "s.explicit"}
	if got := names(s.Snapshot().Capabilities); !slices.Equal(got, want) {
		t.Fatalf("after EndTurn the session holds %q, want %q", got, want)
	}
	seq = s.LastSeq()
	if got := s.EndTurn(protocol.TurnCompleted, ""); got != 2 {
		t.Fatalf("second EndTurn() = %d, want 2", got)
	}
	if s.LastSeq() != seq+1 {
		t.Errorf("an EndTurn with nothing to drop emitted %d events, want only turn_ended", s.LastSeq()-seq)
	}
}

// listSession holds one capability per audience rule.
func listSession(t *testing.T) *session.Session {
	t.Helper()
	s := session.New("test", nil)
	yes, no := true, false
	client := func(name string, f func(*protocol.Capability)) protocol.Capability {
		c := clientCap(name)
		f(&c)
		return c
	}
	if err := s.Register(session.Client,
		client("c.default", func(*protocol.Capability) {}),
		client("c.llm", func(c *protocol.Capability) { c.Audience = []protocol.Audience{protocol.AudienceLLM} }),
		client("c.user", func(c *protocol.Capability) { c.Audience = []protocol.Audience{protocol.AudienceUser} }),
		client("c.runtime", func(c *protocol.Capability) { c.Audience = []protocol.Audience{protocol.AudienceRuntime} }),
		client("c.all", func(c *protocol.Capability) {
			c.Audience = []protocol.Audience{protocol.AudienceRuntime, protocol.AudienceUser, protocol.AudienceLLM}
		}),
		client("c.nobody", func(c *protocol.Capability) { c.Audience = []protocol.Audience{} }),
		client("c.shim.yes", func(c *protocol.Capability) { c.UserInvokable = &yes }),
		client("c.shim.overridden", func(c *protocol.Capability) {
			c.UserInvokable = &no
			c.Audience = []protocol.Audience{protocol.AudienceUser}
		}),
	); err != nil {
		t.Fatal(err)
	}
	runtime := func(name string, kind protocol.OriginKind, id string, k protocol.Kind) {
		c := agentCap(name)
		c.Origin = protocol.Origin{Kind: kind, ID: id}
		c.Kind = k
		if err := s.RegisterAgent(c, echo); err != nil {
			t.Fatal(err)
		}
	}
	runtime("mcp.effect", protocol.OriginMCP, "m", protocol.KindEffect)
	runtime("mcp.query", protocol.OriginMCP, "m", protocol.KindQuery)
	runtime("skill.render", protocol.OriginSkill, "s", protocol.KindRender)
	runtime("skill.effect", protocol.OriginSkill, "s", protocol.KindEffect)
	runtime("skill.query", protocol.OriginSkill, "s", protocol.KindQuery)
	runtime("agent.effect", protocol.OriginAgent, "", protocol.KindEffect)
	runtime("flow.effect", protocol.OriginFlow, "f", protocol.KindEffect)
	return s
}

// TestList: each audience sees what it may invoke; runtime-only
// capabilities never reach the llm or user lists; the user list follows
// protocol.IsUserInvokable.
func TestList(t *testing.T) {
	s := listSession(t)
	defaultLLM := []string{"agent.effect", "c.default", "c.shim.yes", "flow.effect", "mcp.effect", "mcp.query",
		"skill.effect", "skill.query", "skill.render"}
	want := map[protocol.Audience][]string{
		protocol.AudienceLLM: append([]string{session.CapabilitiesListName, "c.all", "c.llm"}, defaultLLM...),
		protocol.AudienceUser: {session.CapabilitiesListName, "c.all", "c.shim.overridden", "c.shim.yes", "c.user",
			"mcp.effect", "skill.effect", "skill.render"},
		protocol.AudienceRuntime: {session.CapabilitiesListName, "c.all", "c.runtime"},
	}
	for a, w := range want {
		t.Run(string(a), func(t *testing.T) {
			slices.Sort(w)
			got := s.List(a)
			if !slices.Equal(names(got), w) {
				t.Fatalf("List(%s) = %q\nwant %q", a, names(got), w)
			}
			for _, c := range got {
				if a == protocol.AudienceUser && !protocol.IsUserInvokable(&c) {
					t.Errorf("%s is listed for users but IsUserInvokable is false", c.Name)
				}
				if a != protocol.AudienceRuntime && len(c.Audience) == 1 && c.Audience[0] == protocol.AudienceRuntime {
					t.Errorf("runtime-only %s reached the %s list", c.Name, a)
				}
			}
		})
	}
	t.Run("unknown audience", func(t *testing.T) {
		if got := s.List("admin"); len(got) != 0 {
			t.Fatalf("List(admin) = %q, want nothing", names(got))
		}
	})
	t.Run("copies", func(t *testing.T) {
		got := s.List(protocol.AudienceRuntime)
		for i := range got {
			got[i].Description = "changed"
			got[i].InputSchema[0] = '['
			got[i].Audience[0] = protocol.AudienceLLM
		}
		c, _ := s.Lookup("c.runtime")
		if c.Description == "changed" || c.InputSchema[0] != '{' || c.Audience[0] != protocol.AudienceRuntime {
			t.Fatalf("changing a listed capability changed the registry: %+v", c)
		}
	})
}

// TestPromptSection: llm-visible capabilities only, in name order, each
// promptFragment appended.
func TestPromptSection(t *testing.T) {
	s := session.New("test", nil)
	c := func(name, desc, fragment string, a ...protocol.Audience) protocol.Capability {
		x := clientCap(name)
		x.Description, x.PromptFragment, x.Audience = desc, fragment, a
		return x
	}
	if err := s.Register(session.Client,
		c("zeta.tool", "  Last by name.\n", "Call it last.\n"),
		c("alpha.tool", "First by name.", "", protocol.AudienceLLM),
		c("palette.only", "A user command.", "never shown", protocol.AudienceUser),
		c("host.audit", "A host RPC.", "never shown", protocol.AudienceRuntime),
		c("mid.tool", "In the middle.", "  Prefer it over zeta.tool.  ", protocol.AudienceRuntime, protocol.AudienceLLM),
	); err != nil {
		t.Fatal(err)
	}
	const want = `<CAPABILITIES>
## __capabilities.list
List the capabilities you can call in this session, with their descriptions and input schemas.

## alpha.tool
First by name.

## mid.tool
In the middle.
Prefer it over zeta.tool.

## zeta.tool
Last by name.
Call it last.

</CAPABILITIES>
`
	for i := range 3 { // deterministic: map order must not show
		if got := s.PromptSection(); got != want {
			t.Fatalf("PromptSection (try %d):\n%s\nwant:\n%s", i, got, want)
		}
	}
}

// TestCapabilitiesList: the built-in lists what its invoker may call.
func TestCapabilitiesList(t *testing.T) {
	s := listSession(t)
	type listed struct {
		Capabilities []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"capabilities"`
	}
	tests := []struct {
		invoker protocol.Audience
		input   string
		want    []string
	}{
		{protocol.AudienceLLM, `{}`, names(s.List(protocol.AudienceLLM))},
		{protocol.AudienceLLM, ``, names(s.List(protocol.AudienceLLM))},
		{protocol.AudienceLLM, `{"prefix":"skill."}`, []string{"skill.effect", "skill.query", "skill.render"}},
		{protocol.AudienceLLM, `{"prefix":"c.r"}`, []string{}},
		{protocol.AudienceLLM, `{"prefix":"nothing"}`, []string{}},
		{protocol.AudienceUser, `{"prefix":"c."}`, []string{"c.all", "c.shim.overridden", "c.shim.yes", "c.user"}},
		{protocol.AudienceRuntime, `{}`, []string{session.CapabilitiesListName, "c.all", "c.runtime"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.invoker)+tt.input, func(t *testing.T) {
			out := s.Invoke(waitCtx(t), tt.invoker, session.CapabilitiesListName, json.RawMessage(tt.input))
			if !out.IsOK() {
				t.Fatalf("invoke: %s", out.Err)
			}
			var got listed
			if err := json.Unmarshal(out.Value, &got); err != nil {
				t.Fatalf("result %s: %v", out.Value, err)
			}
			gotNames := []string{}
			for _, c := range got.Capabilities {
				gotNames = append(gotNames, c.Name)
				if c.Description == "" || len(c.InputSchema) == 0 {
					t.Errorf("%s is listed without its description or input schema", c.Name)
				}
			}
			if !slices.Equal(gotNames, tt.want) {
				t.Fatalf("listed %q, want %q", gotNames, tt.want)
			}
		})
	}
	t.Run("unknown argument", func(t *testing.T) {
		out := s.Invoke(waitCtx(t), protocol.AudienceLLM, session.CapabilitiesListName, json.RawMessage(`{"filter":"x"}`))
		wantCode(t, out, protocol.CodeInvalidInput)
	})
}

// TestRegisterErrorCutsTheName: an error repeats at most the first 256
// bytes of the capability's name (protocol.MaxNameBytes) — a peer's name may be a megabyte, and
// its error reply was as large.
func TestRegisterErrorCutsTheName(t *testing.T) {
	s := session.New("test", nil)
	long := strings.Repeat("n", 100<<10)
	err := s.Register(session.Client, clientCap(long))
	wantErrCode(t, err, protocol.CodeInvalidRequest)
	if msg := err.Error(); len(msg) > 1024 || !strings.Contains(msg, strings.Repeat("n", protocol.MaxNameBytes)+"…\"") {
		t.Errorf("a 100 KiB name's error is %d bytes (%.200q), want the name cut to %d bytes", len(msg), msg, protocol.MaxNameBytes)
	}
}

// nestedSchema is an array schema whose items nest levels-1 times: its
// JSON nests levels+1 deep ({"type":"object"} at the bottom).
func nestedSchema(levels int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"type":"array","items":`, levels) + `{"type":"object"}` + strings.Repeat("}", levels))
}

// TestSchemaDepthBound: a schema as deep as MaxSchemaDepth compiles;
// brackets inside strings count for nothing. One 5,000 levels deep, which
// held a core for minutes, is refused before it is compiled.
func TestSchemaDepthBound(t *testing.T) {
	for _, raw := range []json.RawMessage{
		nestedSchema(session.MaxSchemaDepth - 1),
		json.RawMessage(`{"type":"object","description":"` + strings.Repeat("[{", 4000) + `"}`),
		// Recursion through a keyword is no cycle: a tree.
		json.RawMessage(`{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}}}}`),
		json.RawMessage(`{"$ref":"#/$defs/node","$defs":{"node":{"anyOf":[{"type":"string"},{"type":"array","items":{"$ref":"#/$defs/node"}}]}}}`),
	} {
		if _, err := session.CompileSchema(raw); err != nil {
			t.Errorf("%.60s…: %v, want it compiled", raw, err)
		}
	}
	if _, err := session.CompileSchema(nestedSchema(5000)); err == nil || !strings.Contains(err.Error(), "$ref") {
		t.Errorf("5,000 levels: %v, want refused, saying to use $ref", err)
	}
}

// TestRegisterRefusesCaseTwins: a name that differs from one in the
// session only in case is refused, naming the other (a tenant's probe put
// FS.READ beside the kernel's fs.read); the session is unchanged.
func TestRegisterRefusesCaseTwins(t *testing.T) {
	s := session.New("test", nil)
	if err := s.Register(session.Client, clientCap("fs.read")); err != nil {
		t.Fatal(err)
	}
	before := state(t, s)
	err := s.Register(session.Client, clientCap("FS.READ"))
	wantRejected(t, s, before, err, "FS.READ", protocol.CodeConflict, `differs only in case from "fs.read"`)
	err = s.Register(session.Client, clientCap("ui.Pick"), clientCap("ui.pick"))
	wantRejected(t, s, before, err, "ui.pick", protocol.CodeConflict, `differs only in case from "ui.Pick"`)
	// Look-alikes of other kinds (the re-probe's): all-Cyrillic, é
	// decomposed, full-width, a ligature.
	for _, tc := range []struct{ have, twin string }{
		{"fs.search", "fs.\u0455\u0435\u0430\u0433\u0441\u04bb"},
		{"ui.pop", "ui.\u0440\u043e\u0440"},
		{"ui.caf\u00e9", "ui.cafe\u0301"},
		{"ui.full", "ui.\uff46\uff55\uff4c\uff4c"},
		{"ui.file", "ui.\ufb01le"},
	} {
		if err := s.Register(session.Client, clientCap(tc.have)); err != nil {
			t.Fatal(err)
		}
		before := state(t, s)
		err := s.Register(session.Client, clientCap(tc.twin))
		wantRejected(t, s, before, err, tc.twin, protocol.CodeConflict, `looks like "`+tc.have+`"`)
	}
	// Deregistered, the other case is free.
	if err := s.Deregister(session.Client, "fs.read"); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(session.Client, clientCap("FS.READ")); err != nil {
		t.Fatalf("after the deregistration: %v", err)
	}
	// Restored from its events, the session knows its names' look-alikes.
	r, err := session.Restore("test", allEvents(t, s), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(session.Client, clientCap("ui.\u0440\u043e\u0440")); err == nil || !strings.Contains(err.Error(), `looks like "ui.pop"`) {
		t.Fatalf("a look-alike after a restore: %v", err)
	}
	if err := r.Register(session.Client, clientCap("fs.read")); err == nil || !strings.Contains(err.Error(), `differs only in case from "FS.READ"`) {
		t.Fatalf("fs.read beside a restored FS.READ: %v", err)
	}
}
