package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// ServerConfig names an external MCP server to [Import]: by ID, and either a
// Command that speaks MCP on its stdin and stdout or the URL of a Streamable
// HTTP endpoint.
type ServerConfig struct {
	// ID names the server: its capabilities are "<ID>.<tool name>", with
	// origin {kind: "mcp", serverId: ID}. Required; no spaces or control
	// characters.
	ID string
	// Command is the program and its arguments (no shell). Its environment
	// is PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR and LANG from
	// brain's, then Env: nothing else of brain's environment (its
	// credentials) reaches the server. Its stderr is discarded.
	Command []string
	// Env holds "KEY=value" entries added to Command's environment.
	Env []string
	// URL is a Streamable HTTP endpoint (http or https).
	URL string
	// Logger receives the import's logs; nil discards them.
	Logger *slog.Logger
}

// inheritedEnv are the variables of brain's environment a Command gets.
var inheritedEnv = []string{"HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"}

// refreshTimeout bounds one re-listing of an imported server's tools.
const refreshTimeout = 30 * time.Second

// Imported is an MCP server whose tools are registered in a session. It is
// safe for concurrent use.
type Imported struct {
	id  string
	s   *session.Session
	cs  *mcp.ClientSession
	log *slog.Logger

	changed chan struct{} // buffered 1: the server's tool list changed
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when follow returns

	mu         sync.Mutex
	registered map[string]string // capability name → its JSON as registered
	closed     bool

	closeOnce sync.Once
	closeErr  error
}

// Import connects to the MCP server cfg names, lists its tools and registers
// each in s as an agent-side capability (through session.Session.RegisterAgent,
// so it is validated and routed like any other):
//
//   - name "<ID>.<tool name>", origin {kind: "mcp", serverId: ID};
//   - description, inputSchema and outputSchema as the server lists them,
//     and its title (or annotations.title) as displayName;
//   - kind "query" for a tool with readOnlyHint, "effect" otherwise.
//
// A tool the session refuses (a name with spaces, a schema that does not
// compile or refers to external documents, a name held by another origin)
// is logged and left out; see [Imported.Names] for what was registered.
//
// A call runs tools/call on the server with the validated input as
// arguments, bounded by the call's context. The value is the result's
// structuredContent when present, else its text as a JSON string (text
// contents joined by newlines), else {"content": [...]} with the contents
// as MCP encodes them. A result with isError is code tool_error with its
// text as message; a JSON-RPC error from the server is tool_error too;
// a transport failure (the server is gone) is unavailable.
//
// The server's notifications/tools/list_changed make the import list again
// and register new or changed tools and deregister removed ones. When the
// connection ends, every imported capability is deregistered.
//
// ctx bounds the connection and the first listing only.
func Import(ctx context.Context, s *session.Session, cfg ServerConfig) (*Imported, error) {
	t, err := cfg.transport()
	if err != nil {
		return nil, fmt.Errorf("import MCP server %q: %w", cfg.ID, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	im := &Imported{
		id: cfg.ID, s: s, log: log.With(slog.String(keyServer, cfg.ID)),
		changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		registered: map[string]string{},
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "brain", Version: buildVersion()}, &mcp.ClientOptions{
		Logger: log,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case im.changed <- struct{}{}:
			default: // a refresh is already due
			}
		},
	})
	im.cs, err = client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("import MCP server %q: connect: %w", cfg.ID, err)
	}
	if err := im.refresh(ctx); err != nil {
		_ = im.cs.Close()
		im.deregisterAll()
		return nil, fmt.Errorf("import MCP server %q: %w", cfg.ID, err)
	}
	go im.follow()
	return im, nil
}

// transport checks cfg and returns the transport it names.
func (cfg *ServerConfig) transport() (mcp.Transport, error) {
	switch {
	case cfg.ID == "":
		return nil, errors.New("the server has no ID")
	case strings.ContainsFunc(cfg.ID, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return nil, errors.New("the server ID contains spaces or control characters")
	case (len(cfg.Command) > 0) == (cfg.URL != ""):
		return nil, errors.New("give exactly one of Command and URL")
	case cfg.URL != "":
		if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
			return nil, fmt.Errorf("URL %q is not http or https", cfg.URL)
		}
		return &mcp.StreamableClientTransport{Endpoint: cfg.URL}, nil
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, cfg.Env...)
	return &mcp.CommandTransport{Command: cmd}, nil
}

// ID returns the server's ID.
func (im *Imported) ID() string { return im.id }

// Names returns the names of the capabilities currently registered for the
// server's tools, sorted.
func (im *Imported) Names() []string {
	im.mu.Lock()
	defer im.mu.Unlock()
	names := make([]string, 0, len(im.registered))
	for n := range im.registered {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close deregisters every imported capability and disconnects from the
// server (a Command's process is asked to exit by closing its stdin, then
// terminated). Calls in flight end with unavailable. It is safe to call
// more than once.
func (im *Imported) Close() error {
	im.closeOnce.Do(func() {
		close(im.stop)
		im.closeErr = im.cs.Close()
		<-im.done
		im.deregisterAll()
	})
	return im.closeErr
}

// follow refreshes on each list_changed until Close or the end of the
// connection.
func (im *Imported) follow() {
	defer close(im.done)
	gone := make(chan struct{})
	go func() {
		_ = im.cs.Wait()
		close(gone)
	}()
	for {
		select {
		case <-im.changed:
			ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
			if err := im.refresh(ctx); err != nil {
				im.log.Warn("re-listing the MCP server's tools failed", slog.String("reason", err.Error()))
			}
			cancel()
		case <-gone:
			im.log.Info("MCP server disconnected; its capabilities are deregistered")
			im.deregisterAll()
			return
		case <-im.stop:
			return
		}
	}
}

// refresh lists the server's tools and makes the session's registrations
// match: new and changed tools are registered, removed ones deregistered.
func (im *Imported) refresh(ctx context.Context) error {
	var tools []*mcp.Tool
	for t, err := range im.cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.closed {
		return nil
	}
	listed := make(map[string]bool, len(tools))
	for _, t := range tools {
		c, err := im.capabilityOf(t)
		if err != nil {
			im.log.Warn("MCP tool not imported", slog.String(keyTool, t.Name), slog.String("reason", err.Error()))
			continue
		}
		listed[c.Name] = true
		fp, err := json.Marshal(c)
		if err != nil {
			im.log.Warn("MCP tool not imported", slog.String(keyTool, t.Name), slog.String("reason", err.Error()))
			continue
		}
		if im.registered[c.Name] == string(fp) {
			continue
		}
		if err := im.s.RegisterAgent(c, &toolHandler{im: im, tool: t.Name}); err != nil {
			im.log.Warn("MCP tool not imported", slog.String(keyTool, t.Name), slog.String("reason", err.Error()))
			// An older registration of ours under this name, if any, is
			// stale now: leaving the name out of listed deregisters it.
			delete(listed, c.Name)
			continue
		}
		im.registered[c.Name] = string(fp)
	}
	var gone []string
	for n := range im.registered {
		if !listed[n] {
			gone = append(gone, n)
		}
	}
	im.deregisterLocked(gone)
	return nil
}

// deregisterAll removes every imported capability; no refresh registers
// any after it.
func (im *Imported) deregisterAll() {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.closed = true
	names := make([]string, 0, len(im.registered))
	for n := range im.registered {
		names = append(names, n)
	}
	im.deregisterLocked(names)
}

func (im *Imported) deregisterLocked(names []string) {
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	if err := im.s.Deregister(session.Runtime, names...); err != nil {
		im.log.Warn("deregistering imported capabilities failed", slog.String("reason", err.Error()))
	}
	for _, n := range names {
		delete(im.registered, n)
	}
}

// capabilityOf maps an MCP tool onto the capability that imports it.
func (im *Imported) capabilityOf(t *mcp.Tool) (protocol.Capability, error) {
	c := protocol.Capability{
		Name:        im.id + "." + t.Name,
		DisplayName: t.Title,
		Description: t.Description,
		Side:        protocol.SideAgent,
		Origin:      protocol.Origin{Kind: protocol.OriginMCP, ID: im.id},
		Kind:        protocol.KindEffect,
	}
	if t.Annotations != nil {
		if c.DisplayName == "" {
			c.DisplayName = t.Annotations.Title
		}
		if t.Annotations.ReadOnlyHint {
			c.Kind = protocol.KindQuery
		}
	}
	var err error
	if t.InputSchema == nil {
		c.InputSchema = json.RawMessage(`{"type":"object"}`)
	} else if c.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
		return c, fmt.Errorf("inputSchema: %w", err)
	}
	if t.OutputSchema != nil {
		if c.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return c, fmt.Errorf("outputSchema: %w", err)
		}
	}
	return c, nil
}

// toolHandler runs an imported capability's calls on the server.
type toolHandler struct {
	im   *Imported
	tool string
}

func (h *toolHandler) Handle(ctx context.Context, c *session.Call) (json.RawMessage, error) {
	res, err := h.im.cs.CallTool(ctx, &mcp.CallToolParams{Name: h.tool, Arguments: c.Input})
	if err != nil {
		var werr *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &werr):
			return nil, protocol.Errorf(protocol.CodeToolError, "MCP server %q refused the call: %s", h.im.id, werr.Message)
		default:
			return nil, protocol.Errorf(protocol.CodeUnavailable, "MCP server %q is unavailable: %v", h.im.id, err)
		}
	}
	if res.IsError {
		msg := joinedText(res.Content)
		if msg == "" {
			msg = "the tool reported an error"
		}
		return nil, protocol.Errorf(protocol.CodeToolError, "%s", msg)
	}
	return valueOf(res)
}

// valueOf is the value of a successful result (see Import).
func valueOf(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	allText := true
	for _, c := range res.Content {
		if _, ok := c.(*mcp.TextContent); !ok {
			allText = false
			break
		}
	}
	if allText {
		return json.Marshal(joinedText(res.Content))
	}
	return json.Marshal(struct {
		Content []mcp.Content `json:"content"`
	}{res.Content})
}

// joinedText joins the text contents, one per line.
func joinedText(cs []mcp.Content) string {
	var b strings.Builder
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
