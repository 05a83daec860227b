package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// serverEnv, when set in the environment, makes the test binary an MCP
// server on stdin and stdout instead of running tests: the stdio import
// tests launch it so.
const serverEnv = "MCPBRIDGE_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		srv := newExternalServer(true)
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The bounded waits of internal/testutil, under this package's names.
const waitLimit = testutil.WaitLimit

func waitCtx(t testing.TB) context.Context { t.Helper(); return testutil.Context(t) }

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return testutil.Recv(t, ch, what)
}

// waitEvent returns the first message of sub that match accepts, failing the
// test after waitLimit.
func waitEvent(t testing.TB, sub *session.Subscription, what string, match func(protocol.Message) bool) protocol.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(ev.Msg) {
			return ev.Msg
		}
	}
}

// registered matches a capability_register event naming name.
func registered(name string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		r, ok := m.(*protocol.CapabilityRegister)
		return ok && slices.ContainsFunc(r.Capabilities, func(c protocol.Capability) bool { return c.Name == name })
	}
}

// deregistered matches a capability_deregister event naming name.
func deregistered(name string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		d, ok := m.(*protocol.CapabilityDeregister)
		return ok && slices.Contains(d.Names, name)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// echoText and the echo capability are the anchors' echo tool: input
// {"text": string}, output {"Text": string}.
const echoText = "The quick brown fox jumps over the lazy dog"

const echoSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

func echoCap() protocol.Capability {
	return protocol.Capability{
		Name:         "echo",
		Description:  "Echo the text back.",
		InputSchema:  json.RawMessage(echoSchema),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"Text":{"type":"string"}},"required":["Text"]}`),
		Side:         protocol.SideAgent,
		Origin:       protocol.Origin{Kind: protocol.OriginAgent},
	}
}

var echoHandler = session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c.Input, &in); err != nil {
		return nil, err
	}
	return json.Marshal(struct{ Text string }{in.Text})
})

func agentCap(name string) protocol.Capability {
	return protocol.Capability{
		Name:        name,
		Description: "Test capability " + name + ".",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Side:        protocol.SideAgent,
		Origin:      protocol.Origin{Kind: protocol.OriginAgent},
	}
}

func returns(v string, err error) session.Handler {
	return session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		return json.RawMessage(v), err
	})
}

// fixture is a session with one capability of each kind the export tests
// need.
type fixture struct {
	s         *session.Session
	runs      atomic.Int32  // calls of "danger" that ran
	blocked   chan struct{} // "block" received its call
	cancelled chan struct{} // "block" saw its context end
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{s: session.New("t1", nil), blocked: make(chan struct{}, 1), cancelled: make(chan struct{}, 1)}
	s := f.s
	must(t, s.RegisterAgent(echoCap(), echoHandler))

	search := agentCap("notes.search")
	search.Kind = protocol.KindQuery
	must(t, s.RegisterAgent(search, returns(`["a","b"]`, nil)))

	must(t, s.RegisterAgent(agentCap("fail"), returns("", protocol.Errorf("rate_limited", "slow down"))))

	danger := agentCap("danger")
	danger.RequiresApproval = true
	must(t, s.RegisterAgent(danger, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		f.runs.Add(1)
		return json.RawMessage(`{"done":true}`), nil
	})))

	must(t, s.RegisterAgent(agentCap("block"), session.HandlerFunc(func(ctx context.Context, _ *session.Call) (json.RawMessage, error) {
		f.blocked <- struct{}{}
		<-ctx.Done()
		f.cancelled <- struct{}{}
		return nil, ctx.Err()
	})))

	secret := agentCap("secret")
	secret.Audience = []protocol.Audience{protocol.AudienceRuntime}
	must(t, s.RegisterAgent(secret, returns(`1`, nil)))

	palette := agentCap("palette.only")
	palette.Audience = []protocol.Audience{protocol.AudienceUser}
	must(t, s.RegisterAgent(palette, returns(`1`, nil)))

	react := protocol.Capability{
		Name:        "platform.react",
		Description: "React with an emoji.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"emoji":{"type":"string"}},"required":["emoji"]}`),
		Side:        protocol.SideClient,
		Origin:      protocol.Origin{Kind: protocol.OriginClient},
	}
	must(t, s.Register(session.Client, react))
	return f
}

// transport connects an MCP client to a session's export.
type transport struct {
	name    string
	connect func(t testing.TB, s *session.Session, opts *mcp.ClientOptions) *mcp.ClientSession
}

// transports are every way the export tests reach a session.
var transports = []transport{
	{"inmemory", connectInMemory},
	{"http", connectHTTP},
}

// connectInMemory serves s with NewServer over the SDK's in-memory
// transports.
func connectInMemory(t testing.TB, s *session.Session, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	srv := mcpbridge.NewServer(s, nil)
	t.Cleanup(func() { _ = srv.Close() })
	st, ct := mcp.NewInMemoryTransports()
	ctx := waitCtx(t)
	ss, err := srv.MCP().Connect(ctx, st, nil)
	must(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(ctx, ct, nil)
	must(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// connectHTTP serves s with Handler on a loopback HTTP server, at
// /sessions/{id}/mcp.
func connectHTTP(t testing.TB, s *session.Session, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	url := serveHTTP(t, s)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).
		Connect(waitCtx(t), &mcp.StreamableClientTransport{Endpoint: url + "/sessions/" + s.ID() + "/mcp"}, nil)
	must(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// serveHTTP serves the given sessions with one Handler on a loopback HTTP
// server and returns its URL.
func serveHTTP(t testing.TB, sessions ...*session.Session) string {
	t.Helper()
	byID := map[string]*session.Session{}
	for _, s := range sessions {
		byID[s.ID()] = s
	}
	h := mcpbridge.Handler(func(r *http.Request) *session.Session { return byID[r.PathValue("id")] }, nil)
	mux := http.NewServeMux()
	mux.Handle("/sessions/{id}/mcp", h)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = h.Close() })
	return ts.URL
}

// text returns the text of a result's only content.
func text(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content = %v, want one text", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T, want text", res.Content[0])
	}
	return tc.Text
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, ok := v.([]byte)
		if !ok {
			if r, ok2 := v.(json.RawMessage); ok2 {
				raw = r
			} else if s, ok3 := v.(string); ok3 {
				raw = []byte(s)
			} else {
				var err error
				if raw, err = json.Marshal(v); err != nil {
					t.Fatal(err)
				}
			}
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return out
	}
	x, y := norm(a), norm(b)
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
