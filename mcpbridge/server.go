package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// ServerOptions configure the MCP servers of [NewServer], [Handler] and
// [ServeEnvironmentStdio]. A nil *ServerOptions means the defaults.
type ServerOptions struct {
	// Name and Version identify the server in the MCP handshake
	// (serverInfo). Defaults: "brain" and the module's build version.
	Name, Version string
	// Instructions are sent to clients at initialization, for the model's
	// system prompt. Default none.
	Instructions string
	// Logger receives the bridge's logs and the SDK's; nil discards them.
	Logger *slog.Logger
	// HTTP configures the Streamable HTTP transport of [Handler] (and is
	// ignored elsewhere); nil means the SDK's defaults: stateful sessions,
	// never closed for idleness, a 4 MiB request limit and DNS-rebinding
	// protection on loopback.
	HTTP *mcp.StreamableHTTPOptions
	// Admit, if set, is asked before every tools/call of a session's
	// server ([NewServer], [Handler]): a non-nil error ends the call at once
	// with that error as its outcome (isError, "<code>: <message>"), and
	// the session is not called. A kernel uses it for quotas
	// (server.Manager.Admit: quota_exceeded once a session's journal is
	// full). Default nil: every call is admitted.
	Admit func(*session.Session) *protocol.Error
	// Elicitation, if set, asks an MCP host that announced (form)
	// elicitation to approve its own calls that need approval: the host's
	// user answers, and the answer decides the call as {side: "mcp"}
	// (session.SideMCP). The session must take such decisions
	// (session.Options.MCPDecisions); otherwise they are refused and the
	// call waits as before. Default off: hosts wait for the client or an
	// operator to decide.
	Elicitation bool
}

func (o *ServerOptions) withDefaults() ServerOptions {
	var out ServerOptions
	if o != nil {
		out = *o
	}
	if out.Name == "" {
		out.Name = "brain"
	}
	if out.Version == "" {
		out.Version = buildVersion()
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// newMCPServer returns an SDK server that advertises the tools capability
// (with listChanged as given) and, when resources is set, the resources
// capability — from the start, not only once a render capability is
// there: a host that connects before the session's client registers its
// renders is sent ui:// links and resources/list_changed later, and a
// strict client reads no resources of a server that did not declare them
// at initialize (MCP 2025-06-18, "Resources": servers that support
// resources MUST declare the capability).
func newMCPServer(o *ServerOptions, listChanged, resources bool) *mcp.Server {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: listChanged}}
	if resources {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: listChanged}
	}
	return mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		Instructions: o.Instructions,
		Logger:       o.Logger,
		Capabilities: caps,
	})
}

// Server serves one session's llm-audience capabilities as MCP tools. It
// keeps the tool list in step with the session's registry until Close. A
// Server is safe for concurrent use; connect any number of MCP sessions to
// [Server.MCP].
type Server struct {
	s     *session.Session
	mcp   *mcp.Server
	log   *slog.Logger
	admit func(*session.Session) *protocol.Error
	sub   *session.Subscription
	done  chan struct{} // closed when follow returns

	// exported maps each tool name to the tool as last added (and its
	// JSON). Changed by NewServer, then by the follow goroutine; guarded
	// by expMu, which restored also takes.
	expMu    sync.Mutex
	exported map[string]exportedTool
	renders  map[string]bool // exported tools that are render capabilities (apps.go); guarded by expMu
	applied  applied         // how far follow has applied the session's events

	elicit bool

	// closing is closed by Close: in-flight calls stop being waited for.
	closing   chan struct{}
	mu        sync.Mutex
	inflight  int           // tools/call handlers running
	idle      chan struct{} // closed when inflight drops to 0 after Close
	closeOnce sync.Once
}

// enter counts a tools/call handler in; false once the server is closing.
func (srv *Server) enter() bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	select {
	case <-srv.closing:
		return false
	default:
	}
	srv.inflight++
	return true
}

func (srv *Server) exit() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.inflight--; srv.inflight == 0 && srv.idle != nil {
		close(srv.idle)
		srv.idle = nil
	}
}

// NewServer returns a Server for s. Its MCP server lists every capability
// visible to the llm audience (session.Session.List), as a tool with:
//
//   - the capability's name and description (its promptFragment, if any,
//     appended after a blank line) and its displayName as title;
//   - inputSchema as registered (when its top-level "type" is not
//     "object", a copy with "type": "object" — MCP arguments are always an
//     object, and the session still validates against the original);
//   - outputSchema as registered, when it describes an object (MCP versions
//     before 2026-07-28 require an object schema there);
//   - annotations.readOnlyHint for kind "query".
//
// A tools/call is session.Session.Invoke(ctx, llm, name, arguments) on the
// request's context, so a client's cancellation cancels the call. A value
// becomes text content holding the JSON, plus structuredContent when the
// value is an object; an error becomes isError with the text
// "<code>: <message>". Only a name the MCP server does not list is a
// protocol error (the SDK's "unknown tool", JSON-RPC -32602).
//
// A goroutine follows the session's events and adds or removes tools on
// every capability_register, capability_deregister and snapshot, so that
// connected clients receive notifications/tools/list_changed. Close stops it.
func NewServer(s *session.Session, opts *ServerOptions) *Server {
	o := opts.withDefaults()
	srv := &Server{
		s:        s,
		mcp:      newMCPServer(&o, true, true),
		log:      o.Logger.With(slog.String(keySession, s.ID())),
		admit:    o.Admit,
		elicit:   o.Elicitation,
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
		exported: map[string]exportedTool{},
		renders:  map[string]bool{},
	}
	// Everything after seq is replayed onto the listed state; applying a
	// registration or removal twice converges, so nothing is missed.
	seq := s.LastSeq()
	srv.syncAll(s.List(protocol.AudienceLLM))
	srv.applied.set(seq)
	srv.sub = s.Subscribe(seq)
	srv.mcp.AddReceivingMiddleware(srv.catchUp, srv.appsMiddleware)
	go srv.follow()
	return srv
}

// MCP returns the SDK server: connect transports to it (Run, Connect), or
// serve it with mcp.NewStreamableHTTPHandler.
func (srv *Server) MCP() *mcp.Server { return srv.mcp }

// Close stops following the registry and closes every MCP session connected
// to the server. It never waits for a call: a tools/call still in flight
// is answered at once with unavailable, and the call itself is left as it
// is in the session — pending, to finish there or be resumed by the
// session's next owner — so that closing (a stop, a handover) writes
// nothing to the session. A call that had already finished is answered
// with its outcome. It is safe to call more than once.
func (srv *Server) Close() error {
	srv.closeOnce.Do(func() {
		srv.detach()
		srv.mu.Lock()
		var idle chan struct{}
		if srv.inflight > 0 {
			idle = make(chan struct{})
			srv.idle = idle
		}
		srv.mu.Unlock()
		srv.sub.Close()
		<-srv.done
		if idle != nil {
			<-idle // handlers return at once once closing is closed
		}
		for ss := range srv.mcp.Sessions() {
			_ = ss.Close()
		}
	})
	return nil
}

// detach makes every tools/call handler stop waiting for its call (see
// Close), and refuses new ones.
func (srv *Server) detach() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	select {
	case <-srv.closing:
	default:
		close(srv.closing)
	}
}

// restored is told that an MCP session opened elsewhere (another node,
// before a restart) was restored here. Its client may have missed a
// list_changed in between, while no node served it: the tool list is
// announced as changed to the server's sessions (a client lists again;
// one more notification than needed is harmless).
func (srv *Server) restored() {
	srv.expMu.Lock()
	defer srv.expMu.Unlock()
	for _, e := range srv.exported {
		srv.mcp.AddTool(e.tool, srv.callTool) // replaced by itself: notifies
		return
	}
}

// follow applies registry changes until the subscription is closed.
func (srv *Server) follow() {
	defer close(srv.done)
	ctx := context.Background() // Close ends Next through the subscription
	for {
		ev, err := srv.sub.Next(ctx)
		if err != nil {
			return
		}
		switch m := ev.Msg.(type) {
		case *protocol.CapabilityRegister:
			for i := range m.Capabilities {
				c := &m.Capabilities[i]
				if session.Visible(c, protocol.AudienceLLM) {
					srv.export(c)
				} else {
					srv.unexport(c.Name)
				}
			}
		case *protocol.CapabilityDeregister:
			srv.unexport(m.Names...)
		case *protocol.Snapshot:
			var visible []protocol.Capability
			for i := range m.Capabilities {
				if session.Visible(&m.Capabilities[i], protocol.AudienceLLM) {
					visible = append(visible, m.Capabilities[i])
				}
			}
			srv.syncAll(visible)
		}
		srv.applied.set(ev.Seq)
	}
}

// syncAll makes the tool list exactly caps.
func (srv *Server) syncAll(caps []protocol.Capability) {
	keep := make(map[string]bool, len(caps))
	for i := range caps {
		keep[caps[i].Name] = true
		srv.export(&caps[i])
	}
	var gone []string
	srv.expMu.Lock()
	for name := range srv.exported {
		if !keep[name] {
			gone = append(gone, name)
		}
	}
	srv.expMu.Unlock()
	srv.unexport(gone...)
}

// export adds or replaces the tool of c, unless it is unchanged. A
// capability the SDK cannot list is logged and left out.
func (srv *Server) export(c *protocol.Capability) {
	if err := srv.tryExport(c); err != nil {
		srv.log.Warn("capability not exported as an MCP tool", slog.String(keyCapability, logName(c)), slog.String("reason", err.Error()))
		srv.unexport(c.Name)
	}
}

func (srv *Server) tryExport(c *protocol.Capability) error {
	t, err := toolOf(c)
	if err != nil {
		return err
	}
	fp, err := json.Marshal(t)
	if err != nil {
		return err
	}
	srv.expMu.Lock()
	defer srv.expMu.Unlock()
	if old, ok := srv.exported[c.Name]; ok && old.fp == string(fp) {
		return nil
	}
	if err := addTool(srv.mcp, t, srv.callTool); err != nil {
		return err
	}
	srv.exported[c.Name] = exportedTool{fp: string(fp), tool: t}
	if c.Render != nil { // apps.go: its MCP App, for hosts that draw them
		srv.exportApp(c)
		srv.renders[c.Name] = true
	} else if srv.renders[c.Name] {
		delete(srv.renders, c.Name)
		srv.mcp.RemoveResources(appURI(c.Name))
	}
	return nil
}

// exportedTool is a tool as last added, and its JSON.
type exportedTool struct {
	fp   string
	tool *mcp.Tool
}

func (srv *Server) unexport(names ...string) {
	srv.expMu.Lock()
	defer srv.expMu.Unlock()
	var gone []string
	for _, n := range names {
		if _, ok := srv.exported[n]; ok {
			delete(srv.exported, n)
			gone = append(gone, n)
		}
		if srv.renders[n] {
			delete(srv.renders, n)
			srv.mcp.RemoveResources(appURI(n))
		}
	}
	if len(gone) > 0 {
		srv.mcp.RemoveTools(gone...)
	}
}

// addTool is Server.AddTool, which panics on a schema it refuses; the
// registry already accepted the capability, so that is an error here.
func addTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	s.AddTool(t, h)
	return nil
}

// arguments returns the raw arguments of a call; absent or null means none.
func arguments(req *mcp.CallToolRequest) json.RawMessage {
	a := req.Params.Arguments
	if bytes.Equal(bytes.TrimSpace(a), []byte("null")) {
		return nil
	}
	return a
}

// toolOf maps a capability onto an MCP tool (see NewServer).
func toolOf(c *protocol.Capability) (*mcp.Tool, error) {
	in, err := objectInputSchema(c.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	t := &mcp.Tool{
		Name:        c.Name,
		Title:       c.DisplayName,
		Description: c.Description,
		InputSchema: in,
	}
	if c.PromptFragment != "" {
		t.Description += "\n\n" + c.PromptFragment
	}
	if schemaType(c.OutputSchema) == "object" {
		t.OutputSchema = json.RawMessage(c.OutputSchema)
	}
	if c.Kind == protocol.KindQuery {
		t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
	}
	return t, nil
}

// schemaType returns the top-level "type" of a schema when it is a single
// string, and "" otherwise.
func schemaType(schema json.RawMessage) string {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	t, _ := s.Type.(string)
	return t
}

// objectInputSchema returns schema when its top-level type is "object", and
// otherwise a copy with "type": "object": the SDK refuses any other input
// schema, and MCP arguments are an object whatever the schema says.
func objectInputSchema(schema json.RawMessage) (json.RawMessage, error) {
	if schemaType(schema) == "object" {
		return schema, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(schema, &m); err != nil {
		return nil, err
	}
	m["type"] = json.RawMessage(`"object"`)
	return json.Marshal(m)
}

// result is a CallToolResult with its one content, in one allocation.
type result struct {
	res     mcp.CallToolResult
	text    mcp.TextContent
	content [1]mcp.Content
}

// resultOf maps an Outcome onto a tools/call result: a value is text
// content holding its JSON, and structuredContent when it is an object; an
// error is isError with the text "<code>: <message>".
func resultOf(out protocol.Outcome) *mcp.CallToolResult {
	r := new(result)
	if out.Err != nil {
		r.text.Text = string(out.Err.Code) + ": " + out.Err.Message
		r.res.IsError = true
	} else {
		v := out.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		r.text.Text = string(v)
		if isObject(v) {
			r.res.StructuredContent = v
		}
	}
	r.content[0] = &r.text
	r.res.Content = r.content[:]
	return &r.res
}

func isObject(v json.RawMessage) bool {
	for _, b := range v {
		switch b {
		case ' ', '\t', '\n', '\r':
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

// logName names a capability in logs by the spec's taxonomy, as package
// session does: capability:<origin kind>:<name>.
func logName(c *protocol.Capability) string {
	return "capability:" + string(c.Origin.Kind) + ":" + c.Name
}

// Log attribute keys.
const (
	keySession    = "session"
	keyCapability = "capability"
	keyServer     = "mcpServer"
	keyTool       = "tool"
	keyCall       = "call"
)

// uiExtension is the MCP Apps extension's identifier (SEP-1865), under
// which a host announces it draws ui:// resources.
const uiExtension = "io.modelcontextprotocol/ui"
