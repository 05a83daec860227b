package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// Logger receives the driver's logs; nil discards.
	Logger *slog.Logger
}

// Driver runs turns of sessions against one model. It is safe for
// concurrent use: each turn is independent.
type Driver struct {
	model Model
	opts  Options
	log   *slog.Logger
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
	// The conversation is read once: during the turn only this runner adds
	// to it, so the steps extend their own copy.
	conv := &conversation{msgs: repair(s.Conversation()), names: map[string]bool{}}
	for i := range conv.msgs {
		conv.noteNames(&conv.msgs[i])
	}
	for step := 1; step <= d.opts.MaxSteps; step++ {
		req, names := d.request(s, conv)
		start := time.Now()
		reply, err := d.model.Step(ctx, req, func(text string) { s.StreamText(turn, text) })
		if ctx.Err() != nil {
			if reply != nil && reply.Text != "" {
				_ = s.AppendMessage(turn, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: reply.Text})
			}
			return protocol.TurnCancelled, context.Cause(ctx)
		}
		if err != nil {
			d.log.Info("model step failed", slog.String("session", s.ID()), slog.Int("turn", turn), slog.Int("step", step), slog.String("error", err.Error()))
			return protocol.TurnError, fmt.Errorf("model step %d: %w", step, err)
		}
		msg := protocol.ChatMessage{Role: protocol.RoleAssistant, Text: reply.Text}
		calls := make([]pendingCall, len(reply.ToolCalls))
		for i, tc := range reply.ToolCalls {
			calls[i] = d.resolve(names, tc, step, i)
			msg.ToolCalls = append(msg.ToolCalls, calls[i].call)
		}
		if err := s.AppendMessage(turn, msg); err != nil {
			return protocol.TurnCancelled, err // the turn was ended elsewhere
		}
		conv.add(msg)
		d.log.Debug("model step", slog.String("session", s.ID()), slog.Int("turn", turn), slog.Int("step", step),
			slog.Int("toolCalls", len(calls)), slog.Duration("duration", time.Since(start)))
		if len(calls) == 0 {
			return protocol.TurnCompleted, nil
		}
		d.invokeAll(ctx, s, calls)
		for i := range calls {
			c := &calls[i]
			m := protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: c.call.ID, Name: c.call.Name, Outcome: &c.outcome}
			if err := s.AppendMessage(turn, m); err != nil {
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

// conversation is a turn's copy of the session's conversation and the
// tool names it mentions.
type conversation struct {
	msgs  []protocol.ChatMessage
	names map[string]bool
}

func (c *conversation) add(m protocol.ChatMessage) {
	c.msgs = append(c.msgs, m)
	c.noteNames(&c.msgs[len(c.msgs)-1])
}

func (c *conversation) noteNames(m *protocol.ChatMessage) {
	for _, tc := range m.ToolCalls {
		c.names[tc.Name] = true
	}
	if m.Role == protocol.RoleTool {
		c.names[m.Name] = true
	}
}

// request builds one model step: the registry is read again each step, so
// a capability registered mid-turn is offered at the next step.
func (d *Driver) request(s *session.Session, conv *conversation) (*Request, *nameMap) {
	caps := s.List(protocol.AudienceLLM)
	all := make([]string, 0, len(caps)+len(conv.names))
	for _, c := range caps {
		all = append(all, c.Name)
	}
	for n := range conv.names {
		all = append(all, n)
	}
	names := newNameMap(all)
	req := &Request{Messages: conv.msgs[:len(conv.msgs):len(conv.msgs)], Tools: make([]Tool, len(caps)), names: names}
	for i, c := range caps {
		desc := c.Description
		if c.DisplayName != "" && !strings.Contains(desc, c.DisplayName) {
			desc = c.DisplayName + ": " + desc
		}
		req.Tools[i] = Tool{Name: names.wire(c.Name), Description: desc, InputSchema: c.InputSchema}
	}
	var b strings.Builder
	if p := strings.TrimSpace(d.opts.System); p != "" {
		b.WriteString(p)
		b.WriteString("\n\n")
	}
	b.WriteString(session.RenderPromptSection(caps)) // the list read above, not a second one
	req.System = b.String()
	return req, names
}

// repair makes a conversation acceptable to the providers: every tool call
// of an assistant message is answered by a tool message right after it (a
// call whose result was never recorded — its turn was ended or the kernel
// died — gets a cancelled one), and a tool message answering no call is
// dropped.
func repair(entries []session.ConversationEntry) []protocol.ChatMessage {
	out := make([]protocol.ChatMessage, 0, len(entries))
	var open []protocol.ToolCall // calls of the last assistant message not yet answered
	closeOpen := func() {
		for _, c := range open {
			o := protocol.Fail(protocol.CodeCancelled, "no result was recorded for this call: the turn ended before it finished")
			out = append(out, protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: c.ID, Name: c.Name, Outcome: &o})
		}
		open = nil
	}
	for _, e := range entries {
		m := e.Message
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

// pendingCall is one tool call of a step, resolved to a capability.
type pendingCall struct {
	call    protocol.ToolCall // as recorded: the capability's name, JSON input
	known   bool
	wire    string
	badJSON error
	outcome protocol.Outcome
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
	}
	in := []byte(strings.TrimSpace(string(tc.Input)))
	if len(in) == 0 {
		in = []byte(`{}`)
	}
	if json.Valid(in) {
		pc.call.Input = in
	} else {
		var v any
		pc.badJSON = json.Unmarshal(in, &v)
		if pc.badJSON == nil {
			pc.badJSON = errors.New("invalid JSON")
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
	switch {
	case !c.known:
		c.outcome = protocol.Fail(protocol.CodeNotFound, "there is no tool named %q; call one of the tools you were given", c.wire)
	case c.badJSON != nil:
		c.outcome = protocol.Fail(protocol.CodeInvalidInput, "the arguments for %q are not valid JSON (%v); send a JSON object matching its input schema", c.wire, c.badJSON)
	default:
		c.outcome = s.Invoke(ctx, protocol.AudienceLLM, c.call.Name, c.call.Input)
	}
}
