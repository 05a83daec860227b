package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// echoSchema and echoInput are the anchors' echo tool (../shared/anchors).
const echoSchema = `{"type":"object","properties":{"text":{"type":"string","maxLength":1000}},"required":["text"],"additionalProperties":false}`

var echoInput = json.RawMessage(`{"text":"the quick brown fox jumps over the lazy dog"}`)

func echoCapability(name string) protocol.Capability {
	return protocol.Capability{Name: name, Description: "Echo the text back.", InputSchema: json.RawMessage(echoSchema),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
}

// rawEcho returns its input: the handler does no work of its own, so the
// benchmark measures the bridge.
var rawEcho = session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
	return c.Input, nil
})

type echoIn struct {
	Text string `json:"text"`
}
type echoOut struct {
	Text string
}

// typedEcho does the anchors' work: decode into a struct, encode the result.
var typedEcho = session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
	var in echoIn
	if err := json.Unmarshal(c.Input, &in); err != nil {
		return nil, err
	}
	return json.Marshal(echoOut(in))
})

// BenchmarkInvoke: one llm invocation of an agent-side Go handler through
// the whole path: lookup, audience, input validation, dispatch, outcome
// (with its event in the log).
func BenchmarkInvoke(b *testing.B) { benchInvoke(b, rawEcho) }

// BenchmarkInvokeTypedEcho is BenchmarkInvoke with the anchors' typed echo
// handler, the same work as the MCP SDK peers' CallTool.
func BenchmarkInvokeTypedEcho(b *testing.B) { benchInvoke(b, typedEcho) }

func benchInvoke(b *testing.B, h session.Handler) {
	s := session.New("bench", nil)
	if err := s.RegisterAgent(echoCapability("echo"), h); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out := s.Invoke(ctx, protocol.AudienceLLM, "echo", echoInput)
		if !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
}

// BenchmarkUserInvokeAck: a user's capability_invoke of an agent-side
// echo, as a client sends it, to its ack — which comes once the call's
// first event is in the log (session.Start); the call runs on.
func BenchmarkUserInvokeAck(b *testing.B) {
	// The calls end on goroutines of their own, behind the acks: room for
	// all of them, so that none is refused for the pending calls' quota.
	s := session.New("bench", &session.Options{MaxPendingCalls: 1 << 24})
	c := echoCapability("echo")
	c.Audience = []protocol.Audience{protocol.AudienceUser}
	if err := s.RegisterAgent(c, rawEcho); err != nil {
		b.Fatal(err)
	}
	f := &protocol.Frame{ID: "i", Msg: &protocol.CapabilityInvoke{Name: "echo", Input: echoInput}}
	b.ReportAllocs()
	for b.Loop() {
		if r := s.HandleFrame(session.Client, f); r.Msg.MessageType() != protocol.TypeAck {
			b.Fatalf("%+v", r.Msg)
		}
	}
}

// BenchmarkRegister1000: registering 1000 distinct capabilities, one call
// each, into a fresh session (schemas compiled every time).
func BenchmarkRegister1000(b *testing.B) {
	caps := make([]protocol.Capability, 1000)
	for i := range caps {
		caps[i] = echoCapability(fmt.Sprintf("tool.%04d", i))
		caps[i].Side, caps[i].Origin = protocol.SideClient, protocol.Origin{Kind: protocol.OriginClient}
	}
	b.ReportAllocs()
	for b.Loop() {
		s := session.New("bench", nil)
		for i := range caps {
			if err := s.Register(session.Client, caps[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReplay1000: a subscriber resuming 1000 events behind reads them
// all (register events and call events, materialised as messages).
func BenchmarkReplay1000(b *testing.B) {
	s := session.New("bench", nil)
	if err := s.RegisterAgent(echoCapability("echo"), rawEcho); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := s.LastSeq()
	for s.LastSeq()-start < 1000 {
		s.Invoke(ctx, protocol.AudienceLLM, "echo", echoInput)
	}
	b.ReportAllocs()
	for b.Loop() {
		sub := s.Subscribe(start)
		for range 1000 {
			if _, err := sub.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		sub.Close()
	}
}

// BenchmarkValidateJSON: the echo input against the echo schema, as the
// invocation path validates it (the fast validator of fastschema.go), and
// through the general validator (the path of schemas outside the fast
// subset; "pattern" keeps it there).
func BenchmarkValidateJSON(b *testing.B) {
	for _, bc := range []struct{ name, schema string }{
		{"fast", echoSchema},
		{"library", `{"type":"object","properties":{"text":{"type":"string","maxLength":1000,"pattern":"^"}},"required":["text"],"additionalProperties":false}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := session.CompileSchema(json.RawMessage(bc.schema))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.ValidateJSON(echoInput); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
