package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// scriptModel answers each step from a script, running the step's during
// hook first (as a tool would while the model waits), and keeps every
// request it was sent.
type scriptModel struct {
	t     *testing.T
	steps []scriptStep
	reqs  []*driver.Request
}

type scriptStep struct {
	during func()
	reply  driver.Reply
}

func (m *scriptModel) Step(_ context.Context, req *driver.Request, _ func(string)) (*driver.Reply, error) {
	m.reqs = append(m.reqs, req)
	if len(m.reqs) > len(m.steps) {
		m.t.Fatalf("step %d: the script has %d", len(m.reqs), len(m.steps))
	}
	st := m.steps[len(m.reqs)-1]
	if st.during != nil {
		st.during()
	}
	r := st.reply
	return &r, nil
}

func toolNamesOf(req *driver.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

func callOf(name string) driver.Reply {
	return driver.Reply{ToolCalls: []protocol.ToolCall{{ID: "call_" + name, Name: name, Input: json.RawMessage(`{}`)}}}
}

var answer = driver.Reply{Text: "done"}

func echoHandler() session.Handler {
	return session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })
}

func mustRegister(t *testing.T, s *session.Session, caps ...protocol.Capability) {
	t.Helper()
	for _, c := range caps {
		if err := s.RegisterAgent(c, echoHandler()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOfferFollowsRegistry: the tools and the <CAPABILITIES> section of a
// step are those of the registry as it is when the step starts, whether a
// step before it was built from the same revision or not; an unchanged
// registry is not built again.
func TestOfferFollowsRegistry(t *testing.T) {
	for _, tt := range []struct {
		name   string
		call   string                                     // the tool the model calls at step 1
		during func(*testing.T, *session.Session)         // runs during step 1
		check  func(t *testing.T, r1, r2 *driver.Request) // step 1 and step 2
	}{
		{
			name: "registered mid-turn",
			call: "a_tool",
			during: func(t *testing.T, s *session.Session) {
				mustRegister(t, s, agentCap("late.echo", `{"type":"object"}`))
			},
			check: func(t *testing.T, r1, r2 *driver.Request) {
				if slices.Contains(toolNamesOf(r1), "late_echo") || !slices.Contains(toolNamesOf(r2), "late_echo") {
					t.Fatalf("tools %q then %q: want late_echo at step 2 only", toolNamesOf(r1), toolNamesOf(r2))
				}
				if !strings.Contains(r2.System, "## late.echo") {
					t.Fatalf("step 2's prompt has no late.echo:\n%s", r2.System)
				}
			},
		},
		{
			name: "replaced mid-turn",
			call: "a_tool",
			during: func(t *testing.T, s *session.Session) {
				c := agentCap("a.tool", `{"type":"object"}`)
				c.Description = "A new description."
				c.PromptFragment = "A new fragment."
				mustRegister(t, s, c)
			},
			check: func(t *testing.T, r1, r2 *driver.Request) {
				if !strings.Contains(r2.System, "A new description.\nA new fragment.") || strings.Contains(r1.System, "A new") {
					t.Fatalf("prompts:\n%s\nthen:\n%s", r1.System, r2.System)
				}
				if i := slices.Index(toolNamesOf(r2), "a_tool"); i < 0 || r2.Tools[i].Description != "A new description." {
					t.Fatalf("step 2's tools %+v", r2.Tools)
				}
			},
		},
		{
			name: "deregistered mid-turn",
			call: "a_tool",
			during: func(t *testing.T, s *session.Session) {
				if err := s.Deregister(session.Runtime, "b.tool"); err != nil {
					t.Error(err)
				}
			},
			check: func(t *testing.T, r1, r2 *driver.Request) {
				if !slices.Contains(toolNamesOf(r1), "b_tool") || slices.Contains(toolNamesOf(r2), "b_tool") || strings.Contains(r2.System, "b.tool") {
					t.Fatalf("tools %q then %q, prompt:\n%s", toolNamesOf(r1), toolNamesOf(r2), r2.System)
				}
			},
		},
		{
			name: "registered again unchanged",
			call: "a_tool",
			during: func(t *testing.T, s *session.Session) {
				mustRegister(t, s, agentCap("a.tool", `{"type":"object"}`))
			},
			check: func(t *testing.T, r1, r2 *driver.Request) {
				if &r1.Tools[0] != &r2.Tools[0] || r1.System != r2.System {
					t.Fatal("an unchanged registry's tools were built again")
				}
			},
		},
		{
			// x.y is no tool, but the conversation names it now: it must
			// not take x_y, the capability's name.
			name: "an unknown tool called, its name taken",
			call: "x.y",
			check: func(t *testing.T, r1, r2 *driver.Request) {
				if !slices.Equal(toolNamesOf(r1), toolNamesOf(r2)) {
					t.Fatalf("tools %q then %q", toolNamesOf(r1), toolNamesOf(r2))
				}
				if w := r2.ToolName("x.y"); w == "x_y" || w == "x.y" {
					t.Fatalf("x.y maps to %q beside the capability x_y", w)
				}
				if w := r2.ToolName("x_y"); w != "x_y" {
					t.Fatalf("x_y maps to %q", w)
				}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("offer", nil)
			mustRegister(t, s, agentCap("a.tool", `{"type":"object"}`), agentCap("b.tool", `{"type":"object"}`), agentCap("x_y", `{"type":"object"}`))
			m := &scriptModel{t: t, steps: []scriptStep{{reply: callOf(tt.call)}, {reply: answer}}}
			if tt.during != nil {
				m.steps[0].during = func() { tt.during(t, s) }
			}
			d := driver.New(m, nil)
			if r, err := d.Turn(testutil.Context(t), s, "go"); r != protocol.TurnCompleted {
				t.Fatal(r, err)
			}
			if len(m.reqs) != 2 {
				t.Fatalf("%d steps, want 2", len(m.reqs))
			}
			tt.check(t, m.reqs[0], m.reqs[1])
		})
	}
}

// TestOfferAcrossTurns: a driver's steps share what they built across
// turns, and a turn-scoped capability dropped at the end of one turn is not
// offered in the next.
func TestOfferAcrossTurns(t *testing.T) {
	s := session.New("turns", nil)
	scratch := agentCap("turn.scratch", `{"type":"object"}`)
	scratch.Scope = protocol.ScopeTurn
	mustRegister(t, s, agentCap("a.tool", `{"type":"object"}`), scratch)
	m := &scriptModel{t: t, steps: []scriptStep{{reply: answer}, {reply: answer}}}
	d := driver.New(m, nil)
	for range 2 {
		if r, err := d.Turn(testutil.Context(t), s, "go"); r != protocol.TurnCompleted {
			t.Fatal(r, err)
		}
	}
	if got := toolNamesOf(m.reqs[0]); !slices.Equal(got, []string{"__capabilities_list", "a_tool", "turn_scratch"}) {
		t.Fatalf("turn 1 offered %q", got)
	}
	if got := toolNamesOf(m.reqs[1]); !slices.Equal(got, []string{"__capabilities_list", "a_tool"}) || strings.Contains(m.reqs[1].System, "turn.scratch") {
		t.Fatalf("turn 2 offered %q, prompt:\n%s", got, m.reqs[1].System)
	}
}

// TestOfferAcrossSessions: one driver running turns of two sessions in
// turn offers each only its own capabilities.
func TestOfferAcrossSessions(t *testing.T) {
	a, b := session.New("a", nil), session.New("b", nil)
	mustRegister(t, a, agentCap("a.only", `{"type":"object"}`))
	mustRegister(t, b, agentCap("b.only", `{"type":"object"}`))
	m := &scriptModel{t: t, steps: []scriptStep{{reply: answer}, {reply: answer}, {reply: answer}, {reply: answer}}}
	d := driver.New(m, nil)
	order := []*session.Session{a, b, a, b}
	for _, s := range order {
		if r, err := d.Turn(testutil.Context(t), s, "go"); r != protocol.TurnCompleted {
			t.Fatal(r, err)
		}
	}
	for i, s := range order {
		own, other := "a_only", "b_only"
		if s == b {
			own, other = other, own
		}
		if got := toolNamesOf(m.reqs[i]); !slices.Contains(got, own) || slices.Contains(got, other) {
			t.Fatalf("turn %d of session %s offered %q", i+1, s.ID(), got)
		}
	}
}

// TestRepairedConversationAcrossSteps: a conversation with a call whose
// result was never recorded is sent repaired at every step of the next
// turn, with the turn's own messages after it, and the repair stays the
// driver's: the session's conversation is not changed by it.
func TestRepairedConversationAcrossSteps(t *testing.T) {
	s := session.New("repaired", nil)
	mustRegister(t, s, agentCap("a.tool", `{"type":"object"}`))
	turn, err := s.StartTurn(session.Runtime, "first")
	if err != nil {
		t.Fatal(err)
	}
	lost := protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "lost", Name: "a.tool", Input: json.RawMessage(`{}`)}}}
	if err := s.AppendMessage(turn, lost); err != nil {
		t.Fatal(err)
	}
	s.EndTurn(protocol.TurnCancelled, "")
	m := &scriptModel{t: t, steps: []scriptStep{{reply: callOf("a_tool")}, {reply: answer}}}
	if r, err := driver.New(m, nil).Turn(testutil.Context(t), s, "second"); r != protocol.TurnCompleted {
		t.Fatal(r, err)
	}
	render := func(msgs []protocol.ChatMessage) []string {
		var out []string
		for _, m := range msgs {
			e := string(m.Role) + " " + m.Text + m.ToolCallID
			if m.Outcome != nil && !m.Outcome.IsOK() {
				e += " " + string(m.Outcome.Err.Code)
			}
			out = append(out, e)
		}
		return out
	}
	base := []string{"user first", "assistant ", "tool lost cancelled", "user second"}
	want := [][]string{base, append(slices.Clone(base), "assistant ", "tool call_a_tool")}
	for i, req := range m.reqs {
		if got := render(req.Messages); !slices.Equal(got, want[i]) {
			t.Fatalf("step %d sent %q, want %q", i+1, got, want[i])
		}
	}
	var kept []protocol.ChatMessage
	for _, e := range s.Conversation() {
		kept = append(kept, e.Message)
	}
	if got := render(kept); !slices.Equal(got, []string{"user first", "assistant ", "user second", "assistant ", "tool call_a_tool", "assistant done"}) {
		t.Fatalf("the session's conversation is %q", got)
	}
}

// hammerModel serves turns of many sessions at once: it finds the session
// from the user's message ("s<i>") and checks each step's tools against
// what that session's registry holds (only.<i>, and extra.<i> while a
// toggle has it registered), calling toggle_<i> on the first two steps.
type hammerModel struct {
	t     *testing.T
	extra []atomic.Bool // by session: extra.<i> is registered
}

func (m *hammerModel) Step(_ context.Context, req *driver.Request, _ func(string)) (*driver.Reply, error) {
	var i, step int
	for _, msg := range req.Messages {
		if msg.Role == protocol.RoleUser {
			fmt.Sscanf(msg.Text, "s%d", &i)
			step = 0
		}
		if msg.Role == protocol.RoleAssistant {
			step++
		}
	}
	names := toolNamesOf(req)
	for j := range m.extra {
		if slices.Contains(names, fmt.Sprintf("only_%d", j)) != (j == i) {
			m.t.Errorf("session %d was offered %q", i, names)
		}
	}
	if has := slices.Contains(names, fmt.Sprintf("extra_%d", i)); has != m.extra[i].Load() {
		m.t.Errorf("session %d step %d: extra offered %v, registered %v", i, step+1, has, m.extra[i].Load())
	}
	if step < 2 {
		return &driver.Reply{ToolCalls: []protocol.ToolCall{{ID: fmt.Sprint("t", step), Name: fmt.Sprintf("toggle_%d", i), Input: json.RawMessage(`{}`)}}}, nil
	}
	return &driver.Reply{Text: "done"}, nil
}

// TestOfferConcurrentSessions: one driver running turns of eight sessions
// at once, each changing its registry mid-turn, offers each step exactly
// its own session's registry (run it with -race).
func TestOfferConcurrentSessions(t *testing.T) {
	const sessions, turns = 8, 10
	m := &hammerModel{t: t, extra: make([]atomic.Bool, sessions)}
	d := driver.New(m, nil)
	var wg sync.WaitGroup
	for i := range sessions {
		s := session.New(fmt.Sprint("s", i), nil)
		extra := agentCap(fmt.Sprintf("extra.%d", i), `{"type":"object"}`)
		mustRegister(t, s, agentCap(fmt.Sprintf("only.%d", i), `{"type":"object"}`))
		if err := s.RegisterAgent(agentCap(fmt.Sprintf("toggle.%d", i), `{"type":"object"}`), session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
			var err error
			if m.extra[i].Load() {
				err = s.Deregister(session.Runtime, extra.Name)
			} else {
				err = s.RegisterAgent(extra, echoHandler())
			}
			m.extra[i].Store(!m.extra[i].Load())
			return json.RawMessage(`{}`), err
		})); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range turns {
				if r, err := d.Turn(testutil.Context(t), s, fmt.Sprint("s", i)); r != protocol.TurnCompleted {
					t.Errorf("session %d: %s %v", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestForeignMessageMidTurn: a message another caller adds to the
// conversation during a turn reaches the model at the next step if the
// conversation stays well-formed, and is repaired away if it breaks it.
func TestForeignMessageMidTurn(t *testing.T) {
	ok := protocol.OK(json.RawMessage(`{}`))
	for _, tt := range []struct {
		name string
		msg  protocol.ChatMessage
		want []string // step 2's messages
	}{
		{"a user message", protocol.ChatMessage{Role: protocol.RoleUser, Text: "also this"},
			[]string{"user go", "user also this", "assistant ", "tool call_a_tool"}},
		{"a result answering no call", protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: "nope", Name: "a.tool", Outcome: &ok},
			[]string{"user go", "assistant ", "tool call_a_tool"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("foreign", nil)
			mustRegister(t, s, agentCap("a.tool", `{"type":"object"}`))
			m := &scriptModel{t: t, steps: []scriptStep{{reply: callOf("a_tool"), during: func() {
				turn, _ := s.CurrentTurn()
				if err := s.AppendMessage(turn, tt.msg); err != nil {
					t.Error(err)
				}
			}}, {reply: answer}}}
			if r, err := driver.New(m, nil).Turn(testutil.Context(t), s, "go"); r != protocol.TurnCompleted {
				t.Fatal(r, err)
			}
			var got []string
			for _, m := range m.reqs[1].Messages {
				got = append(got, string(m.Role)+" "+m.Text+m.ToolCallID)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("step 2 sent %q, want %q", got, tt.want)
			}
		})
	}
}
