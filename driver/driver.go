package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Options configure a [Driver]. A nil *Options means the defaults.
type Options struct {
	// System is the configured system prompt; the session's
	// <CAPABILITIES> section follows it.
	System string
	// MaxSteps bounds the model steps of one turn. Default 16.
	MaxSteps int
	// StepTimeout bounds one model step, from its request to the end of
	// its answer: a step past it fails the turn with an error naming it.
	// Default 15 minutes.
	StepTimeout time.Duration
	// IdleTimeout bounds the wait for the next piece of a streamed answer
	// (a chunk; keep-alive comments are not one): a stream silent that
	// long fails the turn with an error naming it. Default 3 minutes (a
	// reasoning model may think for minutes before its first chunk).
	IdleTimeout time.Duration
	// Logger receives the driver's logs; nil discards.
	Logger *slog.Logger
}

// Driver runs turns of sessions against one model. It is safe for
// concurrent use: each turn is independent.
type Driver struct {
	model Model
	opts  Options
	log   *slog.Logger
	// offer is the latest step's tools, prompt and names, reused by the
	// next step of any turn that would build the same (see offerFor).
	offer atomic.Pointer[offer]
}

// New returns a driver for model m.
func New(m Model, opts *Options) *Driver {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 16
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 15 * time.Minute
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 3 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{model: m, opts: o, log: o.Logger}
}

// Attach makes d run every turn started in s (see
// [session.Session.SetTurnRunner]).
func (d *Driver) Attach(s *session.Session) { s.SetTurnRunner(d.Run) }

// Turn starts a turn in s with the user's message on behalf of the runtime,
// runs it with d, and returns when it has ended: the reason and, for
// reasons other than completed, why. s must not have another runner set.
func (d *Driver) Turn(ctx context.Context, s *session.Session, message string) (protocol.TurnReason, error) {
	turn, err := s.StartTurn(session.Runtime, message)
	if err != nil {
		return protocol.TurnError, err
	}
	reason, rerr := d.Run(ctx, s, turn)
	detail := ""
	if rerr != nil {
		detail = rerr.Error()
	}
	s.FinishTurn(turn, reason, detail)
	return reason, rerr
}

// Run runs turn of s (a [session.TurnRunner]): model steps and tool calls
// until the model answers without tool calls, the step limit, cancellation
// of ctx, or an error.
func (d *Driver) Run(ctx context.Context, s *session.Session, turn int) (protocol.TurnReason, error) {
	conv := newConversation(s, min(2*d.opts.MaxSteps+2, 64))
	onText := func(text string) { s.StreamText(turn, text) }
	debug := d.log.Enabled(ctx, slog.LevelDebug)
	var cur *offer // this turn's latest offer, built for curNames names
	curNames := 0
	for step := 1; step <= d.opts.MaxSteps; step++ {
		if step > 1 {
			conv.read(s) // with the last step's messages
		}
		// The registry is read again before every step: its revision is
		// the read, and an unchanged one means the tools, the prompt and
		// the names of the last step are still what it holds.
		if rev := s.RegistryRevision(); cur == nil || cur.rev != rev || curNames != len(conv.names) {
			cur, curNames = d.offerFor(s, rev, conv.names), len(conv.names)
		}
		names := cur.names
		req := &Request{System: cur.system, Messages: conv.msgs[:len(conv.msgs):len(conv.msgs)], Tools: cur.tools, names: names}
		start := time.Now()
		reply, err := d.step(ctx, s, req, onText) // the model's Step, with render streams (render_stream.go)
		took := time.Since(start)
		if ctx.Err() != nil {
			if reply != nil && reply.Text != "" {
				_ = s.AppendMessage(turn, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: reply.Text})
			}
			return protocol.TurnCancelled, context.Cause(ctx)
		}
		if err != nil {
			d.log.Info("model step failed", slog.String("session", s.ID()), slog.Int("turn", turn), slog.Int("step", step), slog.String("error", err.Error()))
			// What the model had said before the step failed was streamed to
			// the person already: it stays in the conversation, as a
			// cancelled step's does, rather than vanish at the next reload.
			if reply != nil && reply.Text != "" {
				_ = s.AppendMessage(turn, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: reply.Text})
			}
			return protocol.TurnError, fmt.Errorf("model step %d: %w%s", step, err, unreachableHint(err))
		}
		msg := protocol.ChatMessage{Role: protocol.RoleAssistant, Text: reply.Text, Usage: reply.Usage, DurationMs: took.Milliseconds()}
		calls := make([]pendingCall, len(reply.ToolCalls))
		var outcomes []protocol.Outcome
		msg.ToolCalls, outcomes = kept(len(calls))
		for i, tc := range reply.ToolCalls {
			calls[i] = d.resolve(names, tc, step, i)
			msg.ToolCalls[i] = calls[i].call
		}
		// The messages are the driver's, built for the session: handed over,
		// not copied (the conversation's copy shares them, read only).
		if err := s.AppendOwnedMessage(turn, msg); err != nil {
			req.closeStreams()
			if tooLarge(err) { // its event would not fit the journal: nothing was added
				return protocol.TurnError, fmt.Errorf("model step %d: the model's answer: %w", step, err)
			}
			return protocol.TurnCancelled, err // the turn was ended elsewhere
		}
		conv.add(msg)
		if debug {
			d.log.Debug("model step", slog.String("session", s.ID()), slog.Int("turn", turn), slog.Int("step", step),
				slog.Int("toolCalls", len(calls)), slog.Duration("duration", took))
		}
		req.bindStreams(calls)
		if len(calls) == 0 {
			return protocol.TurnCompleted, nil
		}
		d.invokeAll(ctx, s, calls)
		for i := range calls {
			c := &calls[i]
			outcomes[i] = c.outcome
			m := protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: c.call.ID, Name: c.call.Name, Outcome: &outcomes[i], DurationMs: c.took.Milliseconds()}
			if err := s.AppendOwnedMessage(turn, m); err != nil {
				if tooLarge(err) {
					return protocol.TurnError, fmt.Errorf("model step %d: the result of %s: %w", step, c.call.Name, err)
				}
				return protocol.TurnCancelled, err
			}
			conv.add(m)
		}
		if ctx.Err() != nil {
			return protocol.TurnCancelled, context.Cause(ctx)
		}
	}
	return protocol.TurnStepLimit, fmt.Errorf("the model was still calling tools after %d steps (the step limit)", d.opts.MaxSteps)
}

// unreachableHint says what to check when nothing answered at the model
// API's address (a local model server not started, a wrong port); "" for
// other failures.
func unreachableHint(err error) string {
	// Read from the text too: the provider's error is rebuilt, its key
	// redacted (redact.go), and the *net.OpError is not kept.
	var oe *net.OpError
	if !(errors.As(err, &oe) && oe.Op == "dial") && !strings.Contains(err.Error(), ": dial tcp ") {
		return ""
	}
	return " (nothing answers at the model API's address: is the model server running, at that address? It is the config's model.url, or brain chat's --model-url)"
}

// conversation is what a turn sends the model: the session's
// conversation, and the tool names it mentions (the session's list of
// them, which only grows). While the session's conversation is
// well-formed (every tool call answered right after it), which a turn of
// this driver keeps it, it is the session's own messages, read again at
// each step without a copy (neither the session nor the driver modifies a
// message once added). One that needs repairing (a turn ended before its
// calls' results were recorded) is copied and repaired, at the start of
// the turn or when messages the turn did not add break it, and the turn's
// messages appended to the copy.
type conversation struct {
	msgs  []protocol.ChatMessage
	own   bool // msgs is the turn's repaired copy
	want  int  // unless own: how many messages the session has if only the turn added to it
	grow  int  // the room a repaired copy leaves for the turn's messages
	names []string
}

// newConversation starts a turn's conversation from s's.
func newConversation(s *session.Session, grow int) *conversation {
	c := &conversation{grow: grow}
	c.msgs, c.names = s.ConversationMessages()
	c.use(c.msgs, true)
	return c
}

// use takes msgs, the session's messages, checking them when they may be
// broken: at the start of the turn, or when others than the turn added to
// them (nothing in brain does, but Session.AppendMessage is public).
func (c *conversation) use(msgs []protocol.ChatMessage, check bool) {
	if check && !wellFormed(msgs) {
		c.msgs, c.own = repair(msgs, c.grow), true
		return
	}
	c.msgs, c.want = msgs, len(msgs)
}

// read brings the conversation up to date before a step: the session's
// messages again, which include the turn's own, unless the turn has its
// copy, and its tool names.
func (c *conversation) read(s *session.Session) {
	msgs, names := s.ConversationMessages()
	c.names = names
	if !c.own {
		c.use(msgs, len(msgs) != c.want)
	}
}

// add records a message the turn added to the session.
func (c *conversation) add(m protocol.ChatMessage) {
	if c.own {
		c.msgs = append(c.msgs, m)
	} else {
		c.want++
	}
}

// offer is what a model step offers the model, built from one revision
// of a session's registry and the tool names one conversation mentions:
// the tools, the system prompt with its <CAPABILITIES> section, and the
// name mapping. It is never modified once built, so steps of any turn
// share it for as long as the revision and the names stay the same.
type offer struct {
	rev    uint64
	system string
	tools  []Tool
	names  *nameMap
	extra  map[string]bool // names mapped that are not capabilities: the conversation's only
}

// fits reports whether o is what a step at registry revision rev with a
// conversation mentioning names would build. Revisions are unique across
// sessions (see [session.Session.RegistryRevision]), so the capabilities
// match; the names must be the same set.
func (o *offer) fits(rev uint64, names []string) bool {
	if o == nil || o.rev != rev {
		return false
	}
	extra := 0
	for _, n := range names {
		if _, ok := o.names.toWire[n]; !ok {
			return false
		}
		if o.extra[n] {
			extra++
		}
	}
	return extra == len(o.extra)
}

// offerFor returns the offer for a step of s, whose registry was at
// revision rev, with a conversation mentioning names: the driver's latest
// if it fits, or a new one from the registry read again.
func (d *Driver) offerFor(s *session.Session, rev uint64, names []string) *offer {
	if o := d.offer.Load(); o.fits(rev, names) {
		return o
	}
	caps, rev := s.ListRevision(protocol.AudienceLLM)
	o := d.build(caps, rev, names)
	d.offer.Store(o)
	return o
}

// build makes the offer of the llm-audience capabilities caps, read at
// revision rev, and the conversation's tool names.
func (d *Driver) build(caps []protocol.Capability, rev uint64, convNames []string) *offer {
	o := &offer{rev: rev, tools: make([]Tool, len(caps))}
	all := make([]string, 0, len(caps)+len(convNames))
	isCap := make(map[string]bool, len(caps))
	for _, c := range caps {
		all = append(all, c.Name)
		isCap[c.Name] = true
	}
	for _, n := range convNames {
		if !isCap[n] && !o.extra[n] {
			all = append(all, n)
			if o.extra == nil {
				o.extra = map[string]bool{}
			}
			o.extra[n] = true
		}
	}
	o.names = newNameMap(all)
	for i, c := range caps {
		desc := c.Description
		if c.DisplayName != "" && !strings.Contains(desc, c.DisplayName) {
			desc = c.DisplayName + ": " + desc
		}
		o.tools[i] = Tool{Name: o.names.wire(c.Name), Description: desc, InputSchema: c.InputSchema}
	}
	var b strings.Builder
	if p := strings.TrimSpace(d.opts.System); p != "" {
		b.WriteString(p)
		b.WriteString("\n\n")
	}
	b.WriteString(session.RenderPromptSection(caps)) // the list read above, not a second one
	o.system = b.String()
	return o
}

// repair makes a conversation acceptable to the providers: every tool call
// of an assistant message is answered by a tool message right after it (a
// call whose result was never recorded — its turn was ended or the kernel
// died — gets a cancelled one), and a tool message answering no call is
// dropped. The result has room for grow more messages.
func repair(msgs []protocol.ChatMessage, grow int) []protocol.ChatMessage {
	out := make([]protocol.ChatMessage, 0, len(msgs)+grow)
	var open []protocol.ToolCall // calls of the last assistant message not yet answered
	closeOpen := func() {
		for _, c := range open {
			o := protocol.Fail(protocol.CodeCancelled, "no result was recorded for this call: the turn ended before it finished")
			out = append(out, protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: c.ID, Name: c.Name, Outcome: &o})
		}
		open = nil
	}
	for _, m := range msgs {
		if m.Role == protocol.RoleTool {
			i := -1
			for j, c := range open {
				if c.ID == m.ToolCallID {
					i = j
				}
			}
			if i < 0 {
				continue
			}
			open = append(open[:i:i], open[i+1:]...)
			out = append(out, m)
			continue
		}
		closeOpen()
		out = append(out, m)
		if m.Role == protocol.RoleAssistant {
			open = append(open, m.ToolCalls...)
		}
	}
	closeOpen()
	return out
}

// wellFormed reports whether repair would return msgs as they are: every
// tool message answers a call of the assistant message before it not yet
// answered, and every call is answered before the next user or assistant
// message and the end. (An assistant message of more than 64 calls is
// left to repair.)
func wellFormed(msgs []protocol.ChatMessage) bool {
	var calls []protocol.ToolCall // of the last assistant message
	var answered uint64           // bit i: calls[i] has its result
	complete := func() bool { return answered == uint64(1)<<len(calls)-1 }
	for i := range msgs {
		m := &msgs[i]
		if m.Role == protocol.RoleTool {
			j := -1
			for k := range calls {
				if answered&(1<<k) == 0 && calls[k].ID == m.ToolCallID {
					j = k
				}
			}
			if j < 0 {
				return false
			}
			answered |= 1 << j
			continue
		}
		if !complete() {
			return false
		}
		calls, answered = nil, 0
		if m.Role == protocol.RoleAssistant {
			if len(m.ToolCalls) > 64 {
				return false
			}
			calls = m.ToolCalls
		}
	}
	return complete()
}

// kept returns room for what the conversation keeps of a step of n calls:
// the calls and their outcomes, which the session holds for as long as the
// conversation (the pendingCalls, with their render streams, are not
// kept). A step of one call, the usual, allocates both at once.
func kept(n int) ([]protocol.ToolCall, []protocol.Outcome) {
	switch n {
	case 0:
		return nil, nil
	case 1:
		b := new(struct {
			call    [1]protocol.ToolCall
			outcome [1]protocol.Outcome
		})
		return b.call[:], b.outcome[:]
	}
	return make([]protocol.ToolCall, n), make([]protocol.Outcome, n)
}

// pendingCall is one tool call of a step, resolved to a capability.
type pendingCall struct {
	call    protocol.ToolCall // as recorded: the capability's name, JSON input
	known   bool
	wire    string
	badJSON error
	outcome protocol.Outcome
	took    time.Duration         // from the invocation to the outcome
	stream  *session.RenderStream // the props it streamed, if any (render_stream.go)
}

// resolve maps a tool call of the model back to its capability and checks
// its arguments are JSON.
func (d *Driver) resolve(names *nameMap, tc protocol.ToolCall, step, i int) pendingCall {
	pc := pendingCall{wire: tc.Name, call: protocol.ToolCall{ID: tc.ID, Name: tc.Name}}
	if pc.call.ID == "" {
		pc.call.ID = "call_" + strconv.Itoa(step) + "_" + strconv.Itoa(i)
	}
	if n, ok := names.capability(tc.Name); ok {
		pc.call.Name, pc.known = n, true
	} else if len(tc.Name) > protocol.MaxNameBytes {
		// No capability has such a name, and the conversation keeps it
		// twice (the call, its result): it is kept cut, marked, so that
		// the model still sees which call failed and no event carries
		// hundreds of KiB of it.
		pc.call.Name = cutName(tc.Name)
	}
	// The reply is the driver's: its arguments are kept, not copied.
	in := json.RawMessage(bytes.TrimSpace(tc.Input))
	if len(in) == 0 {
		in = json.RawMessage(`{}`)
	}
	if json.Valid(in) && utf8.Valid(in) { // JSON text is UTF-8: other bytes would reach every peer's frames
		pc.call.Input = in
	} else {
		var v any
		pc.badJSON = json.Unmarshal(in, &v)
		if pc.badJSON == nil {
			pc.badJSON = errors.New("they are not UTF-8")
		}
		pc.call.Input, _ = json.Marshal(string(tc.Input))
	}
	return pc
}

// invokeAll runs the calls of one step, concurrently when there are
// several, each through the session as the llm invoker.
func (d *Driver) invokeAll(ctx context.Context, s *session.Session, calls []pendingCall) {
	if len(calls) == 1 {
		d.invoke(ctx, s, &calls[0])
		return
	}
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { d.invoke(ctx, s, &calls[i]) })
	}
	wg.Wait()
}

func (d *Driver) invoke(ctx context.Context, s *session.Session, c *pendingCall) {
	start := time.Now()
	defer func() { c.took = time.Since(start) }()
	switch {
	case !c.known:
		c.outcome = protocol.Fail(protocol.CodeNotFound, "there is no tool named %q; call one of the tools you were given", c.wire)
	case c.badJSON != nil:
		c.outcome = protocol.Fail(protocol.CodeInvalidInput, "the arguments for %q are not valid JSON (%v); send a JSON object matching its input schema", c.wire, c.badJSON)
	case c.stream != nil:
		c.outcome = s.InvokeStreamed(ctx, c.stream, c.call.Input)
	default:
		c.outcome = s.Invoke(ctx, protocol.AudienceLLM, c.call.Name, c.call.Input)
	}
}

// tooLarge reports an error of code too_large.
func tooLarge(err error) bool {
	var c protocol.Coder
	return errors.As(err, &c) && c.ErrorCode() == protocol.CodeTooLarge
}

// cutName is a name longer than any capability's, cut to fit one.
func cutName(n string) string {
	const keep = protocol.MaxNameBytes - 32
	for i := keep; i > 0; i-- {
		if utf8.RuneStart(n[i]) {
			return n[:i] + "…(" + strconv.Itoa(len(n)) + " bytes)"
		}
	}
	return "…(" + strconv.Itoa(len(n)) + " bytes)"
}
