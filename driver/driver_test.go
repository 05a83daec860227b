package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

const secretKey = "sk-test-SECRET-0123456789abcdef"

type provider struct {
	name string
	new  func(driver.ProviderOptions) (driver.Model, error)
	base func(url string) string
}

var (
	openAI    = provider{"openai", driver.NewOpenAI, func(u string) string { return u + "/v1" }}
	anthropic = provider{"anthropic", driver.NewAnthropic, func(u string) string { return u }}
)

func agentCap(name, schema string) protocol.Capability {
	return protocol.Capability{Name: name, Description: "test capability " + name, InputSchema: json.RawMessage(schema),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
}

const pathSchema = `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`

// fixture is a session with the test capabilities, a driver against a
// stub, and a record of everything the session journaled and logged.
type fixture struct {
	t       *testing.T
	s       *session.Session
	d       *driver.Driver
	stub    *stub
	journal *textJournal
	logs    *strings.Builder
	barrier chan string // par.wait calls announce themselves here
}

// textJournal keeps the encoded frames a store would persist.
type textJournal struct {
	mu     sync.Mutex
	frames []string
	events []session.Event
}

func (j *textJournal) Append(e session.Event) error {
	b, err := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.frames = append(j.frames, string(b))
	f, err := protocol.DecodeFrame(b)
	if err != nil {
		return err
	}
	j.events = append(j.events, session.Event{Seq: f.Seq, Msg: f.Msg})
	return nil
}

func (j *textJournal) text() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.frames, "\n")
}

func newFixture(t *testing.T, p provider, transcript string, opts *driver.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, stub: newStub(t, transcript), journal: &textJournal{}, logs: &strings.Builder{}, barrier: make(chan string, 8)}
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return f.logs.Write(b)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.s = session.New("test", &session.Options{Journal: f.journal, Logger: logger})
	m, err := p.new(driver.ProviderOptions{BaseURL: p.base(f.stub.url()), APIKey: secretKey, Model: "stub-model", MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := &driver.Options{System: "You are a test assistant.", Logger: logger}
	if opts != nil {
		o.MaxSteps, o.StepTimeout, o.IdleTimeout = opts.MaxSteps, opts.StepTimeout, opts.IdleTimeout
	}
	f.d = driver.New(m, o)
	f.register()
	return f
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(b []byte) (int, error) { return w(b) }

func (f *fixture) register() {
	t := f.t
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	read := agentCap("fs.read", pathSchema)
	read.PromptFragment = "Paths are relative to the workspace."
	must(f.s.RegisterAgent(read, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		var in struct{ Path string }
		_ = json.Unmarshal(c.Input, &in)
		return json.Marshal(map[string]string{"text": "contents of " + in.Path})
	})))
	del := agentCap("notes.delete", pathSchema)
	del.RequiresApproval = true
	must(f.s.RegisterAgent(del, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		t.Error("notes.delete ran although it was rejected")
		return json.RawMessage(`{}`), nil
	})))
	slow := agentCap("slow.wait", `{"type":"object"}`)
	ms := int64(50)
	slow.CallTimeoutMs = &ms
	must(f.s.RegisterAgent(slow, session.HandlerFunc(func(ctx context.Context, _ *session.Call) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})))
	// par.wait answers only once both calls of the parallel step are
	// running: run one after the other, the turn would time out.
	var mu sync.Mutex
	arrived := map[string]bool{}
	both := make(chan struct{})
	must(f.s.RegisterAgent(agentCap("par.wait", `{"type":"object","properties":{"who":{"type":"string"}}}`), session.HandlerFunc(func(ctx context.Context, c *session.Call) (json.RawMessage, error) {
		var in struct{ Who string }
		_ = json.Unmarshal(c.Input, &in)
		mu.Lock()
		arrived[in.Who] = true
		if len(arrived) == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
			return json.Marshal(map[string]string{"who": in.Who})
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})))
	must(f.s.RegisterAgent(agentCap("tools.add", `{"type":"object"}`), session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		err := f.s.RegisterAgent(agentCap("late.echo", `{"type":"object","properties":{"text":{"type":"string"}}}`), session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
			return c.Input, nil
		}))
		return json.RawMessage(`{"added":"late.echo"}`), err
	})))
	scratch := agentCap("turn.scratch", `{"type":"object"}`)
	scratch.Scope = protocol.ScopeTurn
	must(f.s.RegisterAgent(scratch, session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
		return json.RawMessage(`{"ok":1}`), nil
	})))
}

// turn runs one turn through the driver and returns its turn_ended event.
func (f *fixture) turn(message string) *protocol.TurnEnded {
	f.t.Helper()
	ctx := testutil.Context(f.t)
	_, _ = f.d.Turn(ctx, f.s, message)
	return f.lastEnded()
}

func (f *fixture) lastEnded() *protocol.TurnEnded {
	f.t.Helper()
	f.journal.mu.Lock()
	defer f.journal.mu.Unlock()
	for i := len(f.journal.events) - 1; i >= 0; i-- {
		if e, ok := f.journal.events[i].Msg.(*protocol.TurnEnded); ok {
			return e
		}
	}
	f.t.Fatal("no turn_ended event")
	return nil
}

// transcript renders the conversation compactly: role, text, calls and
// outcome codes.
func (f *fixture) transcript() []string {
	var out []string
	for _, e := range f.s.Conversation() {
		m := e.Message
		switch m.Role {
		case protocol.RoleTool:
			code := "ok"
			if !m.Outcome.IsOK() {
				code = string(m.Outcome.Err.Code)
			}
			out = append(out, fmt.Sprintf("tool %s %s: %s", m.ToolCallID, m.Name, code))
		default:
			s := string(m.Role) + ": " + m.Text
			for _, c := range m.ToolCalls {
				s += fmt.Sprintf(" [%s %s %s]", c.ID, c.Name, c.Input)
			}
			out = append(out, s)
		}
	}
	return out
}

func (f *fixture) wantTranscript(want ...string) {
	f.t.Helper()
	if got := f.transcript(); !slices.Equal(got, want) {
		f.t.Fatalf("conversation:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func wantReason(t *testing.T, e *protocol.TurnEnded, reason protocol.TurnReason, errPart string) {
	t.Helper()
	if e.Reason != reason || !strings.Contains(e.Error, errPart) {
		t.Fatalf("turn_ended %+v, want reason %s with an error containing %q", e, reason, errPart)
	}
}

// toolResults returns the tool-result contents a request carried, in
// order (OpenAI: role tool messages; Anthropic: tool_result blocks).
func toolResults(req map[string]any) []string {
	var out []string
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		m, _ := m.(map[string]any)
		if m["role"] == "tool" {
			out = append(out, fmt.Sprint(m["content"]))
		}
		if blocks, ok := m["content"].([]any); ok {
			for _, b := range blocks {
				b, _ := b.(map[string]any)
				if b["type"] == "tool_result" {
					out = append(out, fmt.Sprint(b["content"]))
				}
			}
		}
	}
	return out
}

func toolNames(req map[string]any) []string {
	var out []string
	tools, _ := req["tools"].([]any)
	for _, t := range tools {
		t, _ := t.(map[string]any)
		if fn, ok := t["function"].(map[string]any); ok {
			out = append(out, fmt.Sprint(fn["name"]))
		} else {
			out = append(out, fmt.Sprint(t["name"]))
		}
	}
	return out
}

func systemPrompt(req map[string]any) string {
	if s, ok := req["system"].([]any); ok { // anthropic
		b, _ := s[0].(map[string]any)
		return fmt.Sprint(b["text"])
	}
	msgs, _ := req["messages"].([]any)
	m, _ := msgs[0].(map[string]any)
	return fmt.Sprint(m["content"])
}

func TestMultiStep(t *testing.T) {
	for _, tc := range []struct {
		p          provider
		transcript string
		want       []string
	}{
		{openAI, "openai_multistep.txt", []string{
			"user: what do my notes say?",
			`assistant: Let me read it. [call_1 fs.read {"path":"notes.txt"}]`,
			"tool call_1 fs.read: ok",
			`assistant:  [call_2 fs.read {"path":"todo.txt"}]`,
			"tool call_2 fs.read: ok",
			"assistant: notes.txt says hello.",
		}},
		{anthropic, "anthropic_multistep.txt", []string{
			"user: what do my notes say?",
			`assistant: Let me read it. [toolu_1 fs.read {"path":"notes.txt"}]`,
			"tool toolu_1 fs.read: ok",
			`assistant:  [toolu_2 par.wait {"who":"a"}] [toolu_3 par.wait {"who":"b"}]`,
			"tool toolu_2 par.wait: ok",
			"tool toolu_3 par.wait: ok",
			"assistant: notes.txt says hello.",
		}},
	} {
		t.Run(tc.p.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			sub := f.s.Subscribe(f.s.LastSeq())
			defer sub.Close()
			wantReason(t, f.turn("what do my notes say?"), protocol.TurnCompleted, "")
			f.wantTranscript(tc.want...)
			// The second request carries the first tool's outcome, the
			// system prompt with the <CAPABILITIES> section, and the mapped
			// tool names.
			req := f.stub.request(1)
			if res := toolResults(req); len(res) == 0 || !strings.Contains(res[0], `"ok":true`) || !strings.Contains(res[0], "contents of notes.txt") {
				t.Fatalf("tool results sent: %q", res)
			}
			sys := systemPrompt(f.stub.request(0))
			if !strings.HasPrefix(sys, "You are a test assistant.\n\n<CAPABILITIES>") || !strings.Contains(sys, "Paths are relative to the workspace.") {
				t.Fatalf("system prompt %q", sys)
			}
			names := toolNames(f.stub.request(0))
			for _, n := range []string{"fs_read", "notes_delete", "__capabilities_list"} {
				if !slices.Contains(names, n) {
					t.Fatalf("tools offered %q, want %s among them", names, n)
				}
			}
			// Deltas were streamed as events before the final message.
			var deltas []string
			ctx := testutil.Context(t)
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if d, ok := ev.Msg.(*protocol.AssistantDelta); ok {
					deltas = append(deltas, d.Text)
				}
				if _, ok := ev.Msg.(*protocol.TurnEnded); ok {
					break
				}
			}
			if got := strings.Join(deltas, ""); got != "Let me read it.notes.txt says hello." {
				t.Fatalf("streamed deltas %q", deltas)
			}
		})
	}
}

// TestSchemaPassedThrough: a tool's input schema reaches the provider
// unchanged.
func TestSchemaPassedThrough(t *testing.T) {
	for _, tc := range []struct {
		p          provider
		transcript string
	}{{openAI, "openai_429.txt"}, {anthropic, "anthropic_429.txt"}} {
		t.Run(tc.p.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			f.turn("hi")
			tools, _ := f.stub.request(0)["tools"].([]any)
			for _, tl := range tools {
				tl, _ := tl.(map[string]any)
				var schema any
				if fn, ok := tl["function"].(map[string]any); ok {
					if fn["name"] != "fs_read" {
						continue
					}
					schema = fn["parameters"]
				} else {
					if tl["name"] != "fs_read" {
						continue
					}
					schema = tl["input_schema"]
				}
				got, _ := json.Marshal(schema)
				var want any
				_ = json.Unmarshal([]byte(pathSchema), &want)
				wantB, _ := json.Marshal(want)
				if string(got) != string(wantB) {
					t.Fatalf("schema sent %s, want %s", got, wantB)
				}
				return
			}
			t.Fatal("fs_read was not offered")
		})
	}
}

func TestParallelToolCalls(t *testing.T) {
	f := newFixture(t, openAI, "openai_parallel.txt", nil)
	wantReason(t, f.turn("run both"), protocol.TurnCompleted, "")
	f.wantTranscript(
		"user: run both",
		`assistant:  [call_a par.wait {"who":"a"}] [call_b par.wait {"who":"b"}]`,
		"tool call_a par.wait: ok",
		"tool call_b par.wait: ok",
		"assistant: Both done.",
	)
}

// approveAs answers the next approval request of s with decision.
func approveAs(t *testing.T, s *session.Session, decision protocol.Decision, feedback string) {
	sub := s.Subscribe(s.LastSeq())
	go func() {
		defer sub.Close()
		ctx := testutil.Context(t)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if ar, ok := ev.Msg.(*protocol.ApprovalRequested); ok {
				a := &protocol.CapabilityApprove{CallID: ar.CallID, Decision: decision, Feedback: feedback, DecidedBy: "ada", InputDigest: ar.InputDigest}
				if err := s.Approve(session.Client, a); err != nil {
					t.Errorf("approve: %v", err)
				}
				return
			}
		}
	}()
}

func TestRejectedApprovalFeedback(t *testing.T) {
	for _, tc := range []struct {
		p          provider
		transcript string
		id         string
	}{{openAI, "openai_rejected.txt", "call_1"}, {anthropic, "anthropic_rejected.txt", "toolu_1"}} {
		t.Run(tc.p.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			approveAs(t, f.s, protocol.DecisionRejected, "keep my notes")
			wantReason(t, f.turn("delete my notes"), protocol.TurnCompleted, "")
			res := toolResults(f.stub.request(1))
			if len(res) != 1 || !strings.Contains(res[0], `"code":"rejected"`) || !strings.Contains(res[0], "keep my notes") {
				t.Fatalf("the model was sent %q, want the rejection with its feedback", res)
			}
			if tc.p.name == "anthropic" && !strings.Contains(f.stub.requestJSON(1), `"is_error":true`) {
				t.Fatal("the rejection was not marked is_error")
			}
		})
	}
}

func TestInvalidInputThenCorrected(t *testing.T) {
	f := newFixture(t, openAI, "openai_invalid.txt", nil)
	wantReason(t, f.turn("read my notes"), protocol.TurnCompleted, "")
	f.wantTranscript(
		"user: read my notes",
		`assistant:  [call_1 fs.read {"file":"notes.txt"}]`,
		"tool call_1 fs.read: invalid_input",
		`assistant:  [call_2 fs.read {"path":"notes.txt"}]`,
		"tool call_2 fs.read: ok",
		"assistant: Read it.",
	)
	res := toolResults(f.stub.request(1))
	if len(res) != 1 || !strings.Contains(res[0], `"code":"invalid_input"`) || !strings.Contains(res[0], "/") {
		t.Fatalf("the model was sent %q, want invalid_input with JSON pointers", res)
	}
}

func TestArgumentsNotJSON(t *testing.T) {
	f := newFixture(t, openAI, "openai_badjson.txt", nil)
	wantReason(t, f.turn("read"), protocol.TurnCompleted, "")
	f.wantTranscript(
		"user: read",
		`assistant:  [call_1 fs.read "{\"path\": notes.txt"]`,
		"tool call_1 fs.read: invalid_input",
		"assistant: Sorry.",
	)
	// The model gets its own text back as the arguments.
	if !strings.Contains(f.stub.requestJSON(1), `"arguments":"{\"path\": notes.txt"`) {
		t.Fatalf("second request %s", f.stub.requestJSON(1))
	}
}

func TestToolTimeout(t *testing.T) {
	f := newFixture(t, openAI, "openai_timeout.txt", nil)
	wantReason(t, f.turn("wait"), protocol.TurnCompleted, "")
	res := toolResults(f.stub.request(1))
	if len(res) != 1 || !strings.Contains(res[0], `"code":"timeout"`) {
		t.Fatalf("the model was sent %q, want timeout", res)
	}
}

func TestRegisteredMidTurn(t *testing.T) {
	f := newFixture(t, openAI, "openai_midturn.txt", nil)
	wantReason(t, f.turn("add a tool and use it"), protocol.TurnCompleted, "")
	if names := toolNames(f.stub.request(0)); slices.Contains(names, "late_echo") {
		t.Fatal("late.echo offered before it was registered")
	}
	if names := toolNames(f.stub.request(1)); !slices.Contains(names, "late_echo") {
		t.Fatalf("step 2 offered %q, want late_echo", names)
	}
	f.wantTranscript(
		"user: add a tool and use it",
		`assistant:  [call_1 tools.add {}]`,
		"tool call_1 tools.add: ok",
		`assistant:  [call_2 late.echo {"text":"hi"}]`,
		"tool call_2 late.echo: ok",
		"assistant: late.echo said hi.",
	)
}

func TestTurnScopedDropped(t *testing.T) {
	f := newFixture(t, openAI, "openai_turnscoped.txt", nil)
	wantReason(t, f.turn("use scratch"), protocol.TurnCompleted, "")
	if _, ok := f.s.Lookup("turn.scratch"); ok {
		t.Fatal("turn.scratch survived the end of the turn")
	}
	// One deregister, right before turn_ended.
	evs := f.journal.events
	n := len(evs)
	d, ok := evs[n-2].Msg.(*protocol.CapabilityDeregister)
	if !ok || !slices.Equal(d.Names, []string{"turn.scratch"}) {
		t.Fatalf("before turn_ended: %T %+v", evs[n-2].Msg, evs[n-2].Msg)
	}
}

func TestRetryAfter429(t *testing.T) {
	for _, tc := range []struct {
		p          provider
		transcript string
	}{{openAI, "openai_429.txt"}, {anthropic, "anthropic_429.txt"}} {
		t.Run(tc.p.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			start := time.Now()
			wantReason(t, f.turn("hi"), protocol.TurnCompleted, "")
			if el := time.Since(start); el < 900*time.Millisecond {
				t.Fatalf("retried after %s, before the Retry-After of 1 s", el)
			}
			if f.stub.count() != 2 {
				t.Fatalf("%d requests, want 2", f.stub.count())
			}
			f.wantTranscript("user: hi", "assistant: Hello after the wait.")
		})
	}
}

// TestErrorsEndTheTurn: a 500 (after its retries), a refused request, a
// malformed stream and a stream cut short end the turn with a clear error
// — the provider's own message included (docs/agent.md) — and the API key,
// which the failing server quoted back, appears in no error, event,
// journal record or log line.
func TestErrorsEndTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          provider
		transcript string
		errPart    string
		requests   int
	}{
		{"openai 500", openAI, "openai_500.txt", "500 Internal Server Error: internal failure handling request with Bearer [redacted]", 2},
		{"anthropic 500", anthropic, "anthropic_500.txt", "500", 2},
		{"openai 400", openAI, "openai_400.txt", "400 Bad Request: The model `gpt-nope` does not exist or you do not have access to it.", 1},
		{"openai 404 text", openAI, "openai_400_text.txt", "404 Not Found: 404 page not found: no route /v1/chat/completions on this server", 1},
		{"anthropic 400", anthropic, "anthropic_400.txt", "model: claude-nope is not a known model", 1},
		{"openai malformed", openAI, "openai_malformed.txt", "model step 1", 1},
		{"anthropic malformed", anthropic, "anthropic_malformed.txt", "model step 1", 1},
		{"openai truncated", openAI, "openai_truncated.txt", "ended before the model finished", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			e := f.turn("hi")
			wantReason(t, e, protocol.TurnError, tc.errPart)
			if f.stub.count() != tc.requests {
				t.Fatalf("%d requests, want %d", f.stub.count(), tc.requests)
			}
			if !strings.Contains(f.stub.keys[0], secretKey) {
				t.Fatalf("the stub was not sent the key: %q", f.stub.keys[0])
			}
			for what, text := range map[string]string{"turn_ended": e.Error, "journal": f.journal.text(), "logs": f.logs.String()} {
				if strings.Contains(text, secretKey) || strings.Contains(text, "SECRET") {
					t.Errorf("the API key appears in the %s: %s", what, text)
				}
			}
			if strings.HasSuffix(tc.name, " 500") && !strings.Contains(e.Error, "[redacted]") { // the provider's message quotes the key
				t.Errorf("the echoed key was not redacted: %s", e.Error)
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	for _, tc := range []struct {
		p          provider
		transcript string
	}{{openAI, "openai_hang.txt"}, {anthropic, "anthropic_hang.txt"}} {
		t.Run(tc.p.name, func(t *testing.T) {
			f := newFixture(t, tc.p, tc.transcript, nil)
			f.d.Attach(f.s)
			sub := f.s.Subscribe(f.s.LastSeq())
			defer sub.Close()
			if _, err := f.s.StartTurn(session.Client, "think"); err != nil {
				t.Fatal(err)
			}
			testutil.Recv(t, f.stub.streaming, "the model to start streaming")
			ctx := testutil.Context(t)
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := ev.Msg.(*protocol.AssistantDelta); ok {
					break
				}
			}
			if r := f.s.HandleFrame(session.Client, &protocol.Frame{Msg: &protocol.TurnCancel{Reason: "user pressed stop"}}); r.Msg.MessageType() != protocol.TypeAck {
				t.Fatalf("turn_cancel: %+v", r.Msg)
			}
			select {
			case <-f.s.TurnDone():
			case <-ctx.Done():
				t.Fatal("the turn did not end after turn_cancel")
			}
			wantReason(t, f.lastEnded(), protocol.TurnCancelled, "user pressed stop")
			f.wantTranscript("user: think", "assistant: Thinking about ")
		})
	}
}

func TestStepLimit(t *testing.T) {
	f := newFixture(t, openAI, "openai_steplimit.txt", &driver.Options{MaxSteps: 2})
	wantReason(t, f.turn("loop"), protocol.TurnStepLimit, "2 steps")
	if f.stub.count() != 2 {
		t.Fatalf("%d model steps, want 2", f.stub.count())
	}
}

// TestFailedStepKeepsItsText: the text the model streamed before its step
// failed (the stream cut short) stays in the conversation as the turn's
// assistant message, as a cancelled step's does: it was shown to the
// person as it streamed, and vanished at the next reload.
func TestFailedStepKeepsItsText(t *testing.T) {
	f := newFixture(t, openAI, "openai_cut.txt", nil)
	wantReason(t, f.turn("hi"), protocol.TurnError, "ended before the model finished")
	var got []string
	for _, e := range f.s.Conversation() {
		if e.Message.Role == protocol.RoleAssistant {
			got = append(got, e.Message.Text)
		}
	}
	if len(got) != 1 || got[0] != "Hel" {
		t.Fatalf("assistant messages %q, want the streamed %q", got, "Hel")
	}
}

// TestUnreachableModelSaysWhatToCheck: a model API nothing answers at (a
// local model server not started) ends the turn with the address and
// what to check, not a bare "connection refused".
func TestUnreachableModelSaysWhatToCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	m, err := driver.NewOpenAI(driver.ProviderOptions{BaseURL: "http://" + addr + "/v1", APIKey: "k", Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	reason, err := driver.New(m, nil).Turn(testutil.Context(t), session.New("unreachable", nil), "hi")
	if reason != protocol.TurnError || err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "is the model server running") {
		t.Fatalf("turn ended %s: %v", reason, err)
	}
}
