package driver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// The benchmarks measure the driver against models that answer at once:
// everything but the model. Run them together, so that the step and the
// invocation it makes are measured in one run on the same machine state:
//
//	go test -run XXX -bench 'Driver|Invoke' ./driver/

// instantModel answers at once: a tool call to echo on odd steps, text on
// even ones. It is everything but a model.
type instantModel struct{ n int }

var echoCall = []protocol.ToolCall{{ID: "call_1", Name: "bench_echo", Input: json.RawMessage(`{"text":"hi"}`)}}

var echoInput = json.RawMessage(`{"text":"hi"}`)

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
// cost per turn (turn events, the conversation read, two model steps, four
// conversation messages) plus the invocation. Sessions are renewed every
// 32 turns so the conversation stays short.
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

// callsModel calls echo at every step until it has made left calls or the
// turn has made perTurn, then answers.
type callsModel struct {
	left, perTurn, inTurn int
}

func (m *callsModel) Step(_ context.Context, req *driver.Request, _ func(string)) (*driver.Reply, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == protocol.RoleUser { // a new turn
		m.inTurn = 0
	}
	if m.left == 0 || m.inTurn == m.perTurn {
		return &driver.Reply{Text: "done"}, nil
	}
	m.left--
	m.inTurn++
	return &driver.Reply{ToolCalls: echoCall}, nil
}

// stepTurns runs steps tool-call steps in turns of perTurn (and an answer
// each), with a fresh session every sessionTurns turns so that no
// conversation grows past sessionTurns*(2*perTurn+2) messages; renewing
// the session is not timed. It returns the time the turns took.
func stepTurns(b *testing.B, d *driver.Driver, m *callsModel, steps, sessionTurns int, s **session.Session, turns *int) time.Duration {
	m.left = steps
	var took time.Duration
	for m.left > 0 {
		if *turns%sessionTurns == 0 {
			*s = benchSession(b)
		}
		*turns++
		start := time.Now()
		r, err := d.Turn(context.Background(), *s, "go")
		took += time.Since(start)
		if r != protocol.TurnCompleted {
			b.Fatal(r, err)
		}
	}
	return took
}

// turnsPerSession is how many turns the step benchmarks run in one
// session, whose conversation grows to 16*34 messages.
const turnsPerSession = 16

// BenchmarkDriverToolCallStep is one model step that makes one tool call,
// against a model that answers at once, in turns of 16 such steps and an
// answer (the default step limit's worth), turnsPerSession turns per
// session: the driver's own cost per tool-call step — the registry read,
// the tools and prompt, the name mapping, the assistant message, the
// invocation, the tool message — with the turn's own costs (its events,
// reading the conversation, the answer) spread over its steps.
func BenchmarkDriverToolCallStep(b *testing.B) {
	m := &callsModel{perTurn: 16}
	d := driver.New(m, &driver.Options{MaxSteps: 17})
	b.ReportAllocs()
	b.ResetTimer()
	// Sessions are made ahead, a chunk's worth with the timer stopped.
	const chunk = 1024
	sessions := make([]*session.Session, 0, chunk/16/turnsPerSession+1)
	for done := 0; done < b.N; done += chunk {
		b.StopTimer()
		sessions = sessions[:0]
		for range cap(sessions) {
			sessions = append(sessions, benchSession(b))
		}
		b.StartTimer()
		m.left = min(chunk, b.N-done)
		for turns := 0; m.left > 0; turns++ {
			if r, err := d.Turn(context.Background(), sessions[turns/turnsPerSession], "go"); r != protocol.TurnCompleted {
				b.Fatal(r, err)
			}
		}
	}
}

// BenchmarkInvokeFloor is the invocation alone, the floor of the above.
func BenchmarkInvokeFloor(b *testing.B) {
	s := benchSession(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Invoke(ctx, protocol.AudienceLLM, "bench.echo", echoInput); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
}

// BenchmarkDriverStepVsInvoke interleaves the two above in one loop, so
// that both see the same machine (this one is shared and noisy): rounds of
// one 16-step turn, as in BenchmarkDriverToolCallStep, then 16 bare
// invocations. ns/op is the tool-call step; it reports the invocation
// alone as invoke-ns/op and their ratio as step/invoke.
func BenchmarkDriverStepVsInvoke(b *testing.B) {
	const perTurn = 16
	m := &callsModel{perTurn: perTurn}
	d := driver.New(m, &driver.Options{MaxSteps: perTurn + 1})
	floor := benchSession(b)
	ctx := context.Background()
	var s *session.Session
	turns := 0
	var stepTime, invokeTime time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += perTurn {
		n := min(perTurn, b.N-done)
		stepTime += stepTurns(b, d, m, n, turnsPerSession, &s, &turns)
		start := time.Now()
		for range n {
			if out := floor.Invoke(ctx, protocol.AudienceLLM, "bench.echo", echoInput); !out.IsOK() {
				b.Fatal(out.Err)
			}
		}
		invokeTime += time.Since(start)
	}
	b.StopTimer()
	step := float64(stepTime.Nanoseconds()) / float64(b.N)
	invoke := float64(invokeTime.Nanoseconds()) / float64(b.N)
	b.ReportMetric(step, "ns/op")
	b.ReportMetric(invoke, "invoke-ns/op")
	b.ReportMetric(step/invoke, "step/invoke")
}
