package driver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// instantModel answers at once: a tool call to echo on odd steps, text on
// even ones. It is everything but a model.
type instantModel struct{ n int }

var echoCall = []protocol.ToolCall{{ID: "call_1", Name: "bench_echo", Input: json.RawMessage(`{"text":"hi"}`)}}

func (m *instantModel) Step(_ context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
	m.n++
	if m.n%2 == 1 {
		return &driver.Reply{ToolCalls: echoCall}, nil
	}
	onText("done")
	return &driver.Reply{Text: "done"}, nil
}

func benchSession(b *testing.B) *session.Session {
	s := session.New("bench", nil)
	c := agentCap("bench.echo", `{"type":"object","properties":{"text":{"type":"string"}}}`)
	if err := s.RegisterAgent(c, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		return c.Input, nil
	})); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkDriverToolStep is one turn of two model steps — a tool call,
// then the answer — against a model that answers at once: the driver's own
// cost per tool-call step (prompt and tool list built twice, name mapping,
// four conversation messages, turn events) plus the invocation. Sessions
// are renewed every 32 turns so the conversation stays short.
func BenchmarkDriverToolStep(b *testing.B) {
	d := driver.New(&instantModel{}, nil)
	ctx := context.Background()
	s := benchSession(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i++; i%32 == 0 {
			b.StopTimer()
			s = benchSession(b)
			b.StartTimer()
		}
		if r, err := d.Turn(ctx, s, "go"); r != protocol.TurnCompleted {
			b.Fatal(r, err)
		}
	}
}

// alwaysCalls calls echo at every step.
type alwaysCalls struct{}

func (alwaysCalls) Step(context.Context, *driver.Request, func(string)) (*driver.Reply, error) {
	return &driver.Reply{ToolCalls: echoCall}, nil
}

// BenchmarkDriverToolCallStep is one model step that makes one tool call,
// against a model that answers at once, inside one long turn (b.N steps,
// ended by the step limit): registry read, prompt section, name mapping,
// the assistant message, the invocation, the tool message.
func BenchmarkDriverToolCallStep(b *testing.B) {
	s := benchSession(b)
	d := driver.New(alwaysCalls{}, &driver.Options{MaxSteps: b.N})
	b.ReportAllocs()
	b.ResetTimer()
	if r, _ := d.Turn(context.Background(), s, "go"); r != protocol.TurnStepLimit {
		b.Fatal(r)
	}
}

// BenchmarkInvokeFloor is the invocation alone, the floor of the above.
func BenchmarkInvokeFloor(b *testing.B) {
	s := benchSession(b)
	ctx := context.Background()
	in := json.RawMessage(`{"text":"hi"}`)
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Invoke(ctx, protocol.AudienceLLM, "bench.echo", in); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
}
