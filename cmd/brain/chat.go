package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/internal/textcut"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// modelConfig is the `model:` section of a config (docs/agent.md): which
// model drives turns. `brain serve` runs every turn a peer starts with it;
// `brain chat` uses it in its embedded kernel, its flags overriding it.
type modelConfig struct {
	// Provider is "openai" (the Chat Completions API, also Ollama, vLLM,
	// llama.cpp's server, LM Studio) or "anthropic".
	Provider string `yaml:"provider"`
	// URL is the API's base URL (Ollama: http://127.0.0.1:11434/v1);
	// empty means the provider's own.
	URL string `yaml:"url"`
	// Name is the model name.
	Name string `yaml:"name"`
	// APIKeyEnv names the environment variable holding the key (default
	// OPENAI_API_KEY or ANTHROPIC_API_KEY). The key itself never goes in a
	// config.
	APIKeyEnv string `yaml:"api_key_env"`
	// System is the system prompt; the session's <CAPABILITIES> section
	// follows it.
	System string `yaml:"system"`
	// MaxSteps bounds the model steps of a turn (default 16).
	MaxSteps int `yaml:"max_steps"`
	// StepTimeout bounds one model step (default 15m); IdleTimeout the
	// wait for the next chunk of a streamed answer (default 3m).
	StepTimeout string `yaml:"step_timeout"`
	IdleTimeout string `yaml:"idle_timeout"`
}

// configured reports whether the section names a model.
func (m modelConfig) configured() bool { return m.Provider != "" || m.Name != "" || m.URL != "" }

// newDriver builds the driver the section describes, reading the key from
// its environment variable. Errors name the setting, never the key.
func (m modelConfig) newDriver(getenv func(string) string, logger *slog.Logger) (*driver.Driver, error) {
	p := m.Provider
	if p == "" {
		p = "openai"
	}
	env := m.APIKeyEnv
	var newModel func(driver.ProviderOptions) (driver.Model, error)
	switch p {
	case "openai":
		newModel = driver.NewOpenAI
		if env == "" {
			env = "OPENAI_API_KEY"
		}
	case "anthropic":
		newModel = driver.NewAnthropic
		if env == "" {
			env = "ANTHROPIC_API_KEY"
		}
	default:
		return nil, fmt.Errorf("model provider %q: want openai or anthropic", m.Provider)
	}
	if m.Name == "" {
		return nil, fmt.Errorf("no model name: set model.name in the config or pass --model")
	}
	if m.URL != "" {
		if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("model URL %q: want an absolute http(s) URL such as http://127.0.0.1:11434/v1", m.URL)
		}
	}
	if m.MaxSteps < 0 {
		return nil, fmt.Errorf("model max_steps %d: want a positive number", m.MaxSteps)
	}
	var bounds [2]time.Duration
	for i, v := range []struct{ key, val string }{{"step_timeout", m.StepTimeout}, {"idle_timeout", m.IdleTimeout}} {
		if v.val == "" {
			continue
		}
		d, err := time.ParseDuration(v.val)
		if err != nil || d < time.Second || d > 24*time.Hour {
			return nil, fmt.Errorf("model %s %q: want a duration from 1s to 24h, such as 15m", v.key, v.val)
		}
		bounds[i] = d
	}
	key := getenv(env)
	if key == "" && m.URL == "" {
		return nil, fmt.Errorf("the environment variable %s holding the %s API key is not set (name another with --api-key-env or model.api_key_env)", env, p)
	}
	model, err := newModel(driver.ProviderOptions{BaseURL: m.URL, APIKey: key, Model: m.Name})
	if err != nil {
		return nil, err
	}
	return driver.New(model, &driver.Options{System: m.System, MaxSteps: m.MaxSteps, StepTimeout: bounds[0], IdleTimeout: bounds[1], Logger: logger}), nil
}

// Chat's input, replaced by tests.
var (
	chatStdin    io.Reader = os.Stdin
	chatTerminal           = func() bool {
		fi, err := os.Stdin.Stat()
		return err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
)

// runChat is `brain chat`.
func runChat(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("chat", "chat [flags]", `
Talk to a model whose tool calls go through a brain session, approvals
included. By default chat runs an embedded kernel with the same environment
as brain serve (the example tools over ./workspace, or --config); with --url
it joins a session of a running brain serve, whose config's model: section
runs the turns.

On a terminal it is a REPL: assistant text streams, each tool call and its
outcome is shown, and a call that needs approval asks inline (y approves;
anything else rejects, and what you typed is the feedback). /quit leaves.
With stdin not a terminal it reads one message, runs the turn, prints the
final answer on stdout and exits 0 (1 when the turn failed); approvals
follow --approve.`, "OPENAI_API_KEY=… brain chat --model gpt-4.1")
	provider := fs.String("provider", "", "model API: openai (also Ollama, vLLM, llama.cpp, LM Studio) or anthropic; default openai or the config's")
	modelURL := fs.String("model-url", "", "the model API's base URL, e.g. http://127.0.0.1:11434/v1 for Ollama")
	modelName := fs.String("model", "", "model name, e.g. gpt-4.1, qwen3:8b, claude-sonnet-4-5")
	keyEnv := fs.String("api-key-env", "", "environment variable holding the API key (default OPENAI_API_KEY or ANTHROPIC_API_KEY)")
	approve := fs.String("approve", "never", "piped mode: answer approvals with never (reject) or always (approve)")
	config := fs.String("config", "", "environment config (docs/serve.md) for the embedded kernel; its model: section is the default model")
	data := fs.String("data", "brain-data", "data directory of the embedded kernel (default grants, compiled code)")
	kernelURL := fs.String("url", "", "join a running brain serve instead (http://127.0.0.1:7777)")
	token := fs.String("token", "", "with --url: a client or operator token (default $BRAIN_TOKEN)")
	sessionID := fs.String("session", "chat", "with --url: the session to join")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "chat", fs.Args()); !ok {
		return code
	}
	if *approve != "never" && *approve != "always" {
		return usageError(stderr, "chat", "--approve=%q: want never or always", *approve)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var conn chatConn
	var banner string
	if *kernelURL != "" {
		tok := *token
		if tok == "" {
			tok = os.Getenv("BRAIN_TOKEN")
		}
		c, err := dialChat(ctx, *kernelURL, tok, *sessionID)
		if err != nil {
			fmt.Fprintln(stderr, "brain chat:", err)
			return exitFail
		}
		conn, banner = c, fmt.Sprintf("session %s at %s", *sessionID, *kernelURL)
	} else {
		cfg, err := loadServeConfig(*config, *data)
		if err != nil {
			fmt.Fprintln(stderr, "brain chat:", err)
			return exitFail
		}
		mc := cfg.Model
		for _, o := range []struct {
			v   string
			dst *string
		}{{*provider, &mc.Provider}, {*modelURL, &mc.URL}, {*modelName, &mc.Name}, {*keyEnv, &mc.APIKeyEnv}} {
			if o.v != "" {
				*o.dst = o.v
			}
		}
		d, err := mc.newDriver(os.Getenv, logger)
		if err != nil {
			fmt.Fprintln(stderr, "brain chat:", err)
			return exitUsage
		}
		env, closeEnv, err := buildEnvironment(ctx, cfg, *data, logger)
		if err != nil {
			fmt.Fprintln(stderr, "brain chat:", err)
			return exitFail
		}
		defer closeEnv()
		s := session.New("chat", &session.Options{Logger: logger})
		if err := env.Expose(s); err != nil {
			fmt.Fprintln(stderr, "brain chat:", err)
			return exitFail
		}
		d.Attach(s)
		conn = &localChat{s: s, sub: s.Subscribe(s.LastSeq())}
		banner = fmt.Sprintf("model %s · tools: %s", mc.Name, strings.Join(toolList(env), ", "))
	}
	defer conn.close()
	c := &chat{conn: conn, stdout: stdout, stderr: stderr, approveAll: *approve == "always"}
	if !chatTerminal() {
		return c.piped(ctx)
	}
	return c.repl(ctx, banner)
}

// chatConn is a session as chat sees it: commands in, events out.
type chatConn interface {
	send(ctx context.Context, m protocol.Message) error
	next(ctx context.Context) (protocol.Message, error)
	close()
}

// localChat is the embedded kernel's session.
type localChat struct {
	s   *session.Session
	sub *session.Subscription
}

func (l *localChat) send(_ context.Context, m protocol.Message) error {
	r := l.s.HandleFrame(session.Client, &protocol.Frame{Msg: m})
	if e, ok := r.Msg.(*protocol.ErrorReply); ok {
		return fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	return nil
}

func (l *localChat) next(ctx context.Context) (protocol.Message, error) {
	ev, err := l.sub.Next(ctx)
	return ev.Msg, err
}

func (l *localChat) close() { l.sub.Close() }

// remoteChat is a session of a running brain serve, over its WebSocket.
// Replies to commands arrive among the events: an error reply to a
// command is returned by next as an error. The connection is read on a
// goroutine of its own, never under the caller's context: coder/websocket
// closes a connection whose read's context ends, and chat, interrupted,
// still has to send turn_cancel on it.
type remoteChat struct {
	conn   *websocket.Conn
	n      int
	frames chan remoteFrame // the reader's, in order; closed after its error
	done   chan struct{}    // closed by close: the reader stops
}

// remoteFrame is what the reader read: a frame's message, or why it
// stopped.
type remoteFrame struct {
	msg protocol.Message
	err error
}

func dialChat(ctx context.Context, base, token, id string) (*remoteChat, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--url %q: want the http(s) address of brain serve", base)
	}
	if token == "" {
		return nil, errors.New("--url needs --token (or $BRAIN_TOKEN): a client or operator token of that brain serve")
	}
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/sessions/" + url.PathEscape(id) + "/ws"
	conn, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, errors.New("the kernel refused the token")
		}
		if why := refusal(resp); why != "" {
			return nil, fmt.Errorf("join session %s at %s: %s", id, base, why)
		}
		return nil, fmt.Errorf("connect to %s: %w", base, err)
	}
	conn.SetReadLimit(protocol.MaxFrameBytes)
	// A connection without ?after= begins with a snapshot, taken when the
	// kernel first reads the session for it: wait for it before sending
	// anything, or the events of our own turn could fold into it.
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("join session %s: %w", id, err)
		}
		if f, err := protocol.DecodeFrame(b); err == nil {
			if _, ok := f.Msg.(*protocol.Snapshot); ok {
				break
			}
		}
	}
	r := &remoteChat{conn: conn, frames: make(chan remoteFrame, 16), done: make(chan struct{})}
	go r.read()
	return r, nil
}

// refusal is what the kernel said when it refused a WebSocket handshake
// (its JSON error's message, with the status), or "" when resp is no
// refusal of the kernel's.
func refusal(resp *http.Response) string {
	if resp == nil || resp.StatusCode < 400 {
		return ""
	}
	var e struct {
		Message string `json:"message"`
	}
	if resp.Body != nil {
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&e)
	}
	if e.Message == "" {
		return resp.Status
	}
	return fmt.Sprintf("%s (%d)", e.Message, resp.StatusCode)
}

// read reads the connection until it fails or close is called.
func (r *remoteChat) read() {
	defer close(r.frames)
	for {
		var out remoteFrame
		_, b, err := r.conn.Read(context.Background()) // close ends it
		if err == nil {
			var f *protocol.Frame
			if f, err = protocol.DecodeFrame(b); err == nil {
				out.msg = f.Msg
			}
		}
		out.err = err
		select {
		case r.frames <- out:
		case <-r.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (r *remoteChat) send(ctx context.Context, m protocol.Message) error {
	r.n++
	b, err := protocol.EncodeFrame(&protocol.Frame{ID: "chat-" + strconv.Itoa(r.n), Msg: m})
	if err != nil {
		return err
	}
	return r.conn.Write(ctx, websocket.MessageText, b)
}

func (r *remoteChat) next(ctx context.Context) (protocol.Message, error) {
	for {
		var f remoteFrame
		select {
		case got, ok := <-r.frames:
			if !ok {
				return nil, errors.New("the connection to the kernel has ended")
			}
			f = got
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			return nil, f.err
		}
		switch m := f.msg.(type) {
		case *protocol.Ack, *protocol.Snapshot:
			continue
		case *protocol.ErrorReply:
			return nil, fmt.Errorf("%s: %s", m.Code, m.Message)
		}
		return f.msg, nil
	}
}

func (r *remoteChat) close() {
	close(r.done)
	_ = r.conn.Close(websocket.StatusNormalClosure, "")
}

// chat runs turns over a conn and shows them.
type chat struct {
	conn           chatConn
	stdout, stderr io.Writer
	approveAll     bool
	lines          chan string // terminal mode: stdin, line by line
}

// piped runs one turn with all of stdin as the message.
func (c *chat) piped(ctx context.Context) int {
	b, err := io.ReadAll(io.LimitReader(chatStdin, session.MaxUserMessageBytes+1))
	if err != nil {
		fmt.Fprintln(c.stderr, "brain chat: read stdin:", err)
		return exitFail
	}
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		fmt.Fprintln(c.stderr, "brain chat: stdin holds no message")
		return exitUsage
	}
	if msg == "/cancel" {
		if err := c.cancelTurn(ctx); err != nil {
			fmt.Fprintln(c.stderr, "brain chat:", err)
			return exitFail
		}
		return exitOK
	}
	end, final, err := c.turn(ctx, msg, false)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintln(c.stderr, "brain chat: interrupted: the turn was cancelled")
		return exitFail
	}
	if err != nil {
		fmt.Fprintln(c.stderr, "brain chat:", err)
		return exitFail
	}
	if final != "" {
		fmt.Fprintln(c.stdout, final)
	}
	if end.Reason != protocol.TurnCompleted {
		fmt.Fprintf(c.stderr, "brain chat: the turn ended: %s", end.Reason)
		if end.Error != "" {
			fmt.Fprintf(c.stderr, ": %s", end.Error)
		}
		fmt.Fprintln(c.stderr)
		return exitFail
	}
	return exitOK
}

// repl reads messages until /quit or the end of stdin.
func (c *chat) repl(ctx context.Context, banner string) int {
	c.lines = make(chan string)
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(chatStdin)
		sc.Buffer(nil, session.MaxUserMessageBytes)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	fmt.Fprintf(c.stdout, "brain chat: %s\nType a message; /cancel cancels a turn left running, /quit leaves.\n", banner)
	for {
		fmt.Fprint(c.stdout, "> ")
		var line string
		select {
		case l, ok := <-c.lines:
			if !ok {
				fmt.Fprintln(c.stdout)
				return exitOK
			}
			line = strings.TrimSpace(l)
		case <-ctx.Done():
			fmt.Fprintln(c.stdout)
			return exitOK
		}
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return exitOK
		case "/cancel":
			if err := c.cancelTurn(ctx); err != nil {
				fmt.Fprintln(c.stderr, "brain chat:", err)
			}
			continue
		}
		end, _, err := c.turn(ctx, line, true)
		if err != nil && ctx.Err() != nil {
			fmt.Fprintln(c.stderr, "brain chat: interrupted: the turn was cancelled")
			return exitOK
		}
		if err != nil {
			fmt.Fprintln(c.stderr, "brain chat:", err)
			continue
		}
		if end.Reason != protocol.TurnCompleted {
			fmt.Fprintf(c.stdout, "[turn %d ended: %s", end.Turn, end.Reason)
			if end.Error != "" {
				fmt.Fprintf(c.stdout, ": %s", end.Error)
			}
			fmt.Fprintln(c.stdout, "]")
		}
	}
}

// turn starts a turn with msg and follows its events to turn_ended. It
// returns that event and the last assistant text. Interactive turns print
// the text as it streams and ask about approvals; piped ones report tool
// calls on stderr and answer approvals with the --approve policy.
func (c *chat) turn(ctx context.Context, msg string, interactive bool) (*protocol.TurnEnded, string, error) {
	if err := c.conn.send(ctx, &protocol.TurnStart{Message: msg}); err != nil {
		return nil, "", withCancelHint(err)
	}
	show := c.stderr
	if interactive {
		show = c.stdout
	}
	turn := 0
	final := ""
	midLine := false
	heard := false // something of the turn beyond its start
	for {
		// Until the turn says something, the wait is bounded by the
		// hint's delay: a kernel without a model leaves a turn to an
		// agent runtime, and the person waits on nothing.
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !heard {
			wctx, cancel = context.WithTimeout(ctx, chatQuietHint)
		}
		m, err := c.conn.next(wctx)
		cancel()
		if err != nil && !heard && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			heard = true // said once
			fmt.Fprintf(c.stderr, "brain chat: nothing from the model after %s. It may still be thinking; but a kernel whose config has no model: section runs no turns itself (an agent runtime would): give it one (examples/chat.yaml) and restart it. Ctrl-C cancels the turn.\n", chatQuietHint)
			continue
		}
		if err != nil && ctx.Err() == nil {
			return nil, final, withCancelHint(err)
		}
		if err != nil {
			if ctx.Err() != nil {
				cctx, cancel := context.WithTimeout(context.Background(), 2e9)
				_ = c.conn.send(cctx, &protocol.TurnCancel{Reason: "brain chat was interrupted"})
				cancel()
			}
			return nil, final, err
		}
		switch m := m.(type) {
		case *protocol.TurnStarted:
			if turn == 0 {
				turn = m.Turn
			}
		case *protocol.AssistantDelta:
			heard = heard || m.Turn == turn
			if m.Turn == turn && interactive {
				fmt.Fprint(c.stdout, m.Text)
				midLine = !strings.HasSuffix(m.Text, "\n")
			}
		case *protocol.ConversationMessage:
			if m.Turn != turn {
				continue
			}
			cm := m.Message
			heard = heard || cm.Role != protocol.RoleUser
			switch cm.Role {
			case protocol.RoleAssistant:
				if midLine {
					fmt.Fprintln(c.stdout)
					midLine = false
				}
				final = cm.Text
				for _, tc := range cm.ToolCalls {
					fmt.Fprintf(show, "  → %s %s\n", tc.Name, clip(string(tc.Input), 200))
				}
			case protocol.RoleTool:
				fmt.Fprintf(show, "  ← %s %s\n", cm.Name, outcomeLine(cm.Outcome))
			}
		case *protocol.ApprovalRequested:
			if turn == 0 || m.Invoker != protocol.AudienceLLM {
				continue
			}
			heard = true
			if err := c.decide(ctx, m, interactive, show); err != nil {
				fmt.Fprintln(c.stderr, "brain chat: approval:", err)
			}
		case *protocol.TurnEnded:
			if m.Turn == turn {
				if midLine {
					fmt.Fprintln(c.stdout)
				}
				return m, final, nil
			}
		}
	}
}

// withCancelHint adds to the refusal of a turn because another is
// running how chat cancels that one.
func withCancelHint(err error) error {
	if strings.HasPrefix(err.Error(), string(protocol.CodeConflict)+": turn ") {
		return fmt.Errorf("%w (/cancel cancels it: typed here, or as the message of a piped brain chat)", err)
	}
	return err
}

// chatQuietHint is how long a turn may say nothing before chat says
// what could be wrong; a variable for tests.
var chatQuietHint = 20 * time.Second

// cancelTurn cancels the session's running turn — one an interrupted chat
// left, say — and waits for its end.
func (c *chat) cancelTurn(ctx context.Context) error {
	if err := c.conn.send(ctx, &protocol.TurnCancel{Reason: "cancelled with /cancel in brain chat"}); err != nil {
		return err
	}
	for {
		m, err := c.conn.next(ctx)
		if err != nil {
			return err
		}
		if e, ok := m.(*protocol.TurnEnded); ok {
			fmt.Fprintf(c.stderr, "brain chat: turn %d cancelled\n", e.Turn)
			return nil
		}
	}
}

// decide answers an approval request: inline on a terminal, by policy
// otherwise.
func (c *chat) decide(ctx context.Context, ar *protocol.ApprovalRequested, interactive bool, show io.Writer) error {
	a := &protocol.CapabilityApprove{CallID: ar.CallID, DecidedBy: "brain chat", InputDigest: ar.InputDigest}
	if !interactive {
		if c.approveAll {
			a.Decision = protocol.DecisionApproved
		} else {
			a.Decision, a.Feedback = protocol.DecisionRejected, "not approved: brain chat runs with --approve=never"
		}
		fmt.Fprintf(show, "  ? %s %s: %s (--approve=%s)\n", ar.Name, clip(string(ar.Input), 200), a.Decision, map[bool]string{true: "always", false: "never"}[c.approveAll])
		return c.conn.send(ctx, a)
	}
	fmt.Fprintf(c.stdout, "  ? %s %s needs approval. y approves; anything else rejects (what you type is the feedback): ", ar.Name, clip(string(ar.Input), 200))
	var line string
	select {
	case l, ok := <-c.lines:
		if !ok {
			l = ""
		}
		line = strings.TrimSpace(l)
	case <-ctx.Done():
		return ctx.Err()
	}
	switch strings.ToLower(line) {
	case "y", "yes":
		a.Decision = protocol.DecisionApproved
	case "", "n", "no":
		a.Decision = protocol.DecisionRejected
	default:
		a.Decision, a.Feedback = protocol.DecisionRejected, line
	}
	return c.conn.send(ctx, a)
}

func outcomeLine(o *protocol.Outcome) string {
	if o == nil {
		return "(no outcome)"
	}
	if o.IsOK() {
		return "ok " + clip(string(o.Value), 200)
	}
	return string(o.Err.Code) + ": " + clip(o.Err.Message, 300)
}

// clip puts s on one line of at most n bytes (and an ellipsis), cut
// between characters.
func clip(s string, n int) string { return textcut.Cut(strings.ReplaceAll(s, "\n", " "), n) }
