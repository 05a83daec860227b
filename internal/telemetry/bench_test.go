package telemetry_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/brainrt/brain/internal/telemetry"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// BenchmarkInvokeObserved: one agent-side call through a session, with no
// Observe (the floor), with metrics, and with metrics and spans (recorded
// in memory, batched as an OTLP exporter would be).
func BenchmarkInvokeObserved(b *testing.B) {
	for _, mode := range []string{"floor", "metrics", "metrics+traces"} {
		b.Run(mode, func(b *testing.B) {
			var o session.Options
			switch mode {
			case "metrics":
				o.Observe = telemetry.New(&telemetry.Options{Registry: prometheus.NewRegistry()}).Observe
			case "metrics+traces":
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				o.Observe = telemetry.New(&telemetry.Options{Registry: prometheus.NewRegistry(), TracerProvider: tp}).Observe
			}
			s := session.New("bench", &o)
			c := protocol.Capability{Name: "math.id", Description: "Identity.", InputSchema: json.RawMessage(`{"type":"object"}`),
				Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
			if err := s.RegisterAgent(c, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })); err != nil {
				b.Fatal(err)
			}
			ctx, in := context.Background(), json.RawMessage(`{}`)
			b.ReportAllocs()
			for b.Loop() {
				if out := s.Invoke(ctx, protocol.AudienceLLM, "math.id", in); out.Err != nil {
					b.Fatal(out.Err)
				}
			}
		})
	}
}
