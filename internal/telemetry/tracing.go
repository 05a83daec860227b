package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// brain's own span attributes, beside the GenAI semantic conventions.
const (
	attrSession   = attribute.Key("brain.session.id")
	attrOrigin    = attribute.Key("brain.capability.origin")
	attrSide      = attribute.Key("brain.capability.side")
	attrInvoker   = attribute.Key("brain.invoker")
	attrCode      = attribute.Key("brain.outcome.code")
	attrDecision  = attribute.Key("brain.approval.decision")
	attrDecidedBy = attribute.Key("brain.approval.decided_by")
	attrRestored  = attribute.Key("brain.call.restored")
)

// startSpan starts the call's span, "execute_tool <name>", as the GenAI
// semantic conventions name a tool execution. Its parent is the invoker's
// context (CallStarted.Context) when it carries a span.
func (t *Telemetry) startSpan(c *callState, ev session.CallEvent) {
	if t.tracer == nil {
		return
	}
	parent := ev.Context
	if parent == nil {
		parent = context.Background()
	}
	at := ev.Time
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(ev.Name),
		semconv.GenAIToolCallID(ev.CallID),
		semconv.GenAIToolTypeKey.String(toolType(ev.Side)),
		attrSession.String(ev.Session),
		attrOrigin.String(string(ev.Origin.Kind)),
		attrSide.String(string(ev.Side)),
		attrInvoker.String(string(ev.Invoker)),
	}
	if ev.Kind != session.CallStarted {
		attrs = append(attrs, attrRestored.Bool(true)) // resumed after a restart: its start is not known
	}
	c.ctx, c.span = t.tracer.Start(parent, "execute_tool "+ev.Name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(at), trace.WithAttributes(attrs...))
}

// toolType is gen_ai.tool.type: "function" for a tool brain runs itself,
// "extension" for one a peer (client, app) runs.
func toolType(side protocol.Side) string {
	if side == protocol.SideAgent {
		return "function"
	}
	return "extension"
}

// child starts a child span of the call's span; nil without tracing.
func (t *Telemetry) child(c *callState, name string, at time.Time) trace.Span {
	if t.tracer == nil || c.ctx == nil {
		return nil
	}
	_, s := t.tracer.Start(c.ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(at))
	return s
}

// endSpans ends the call's handler span and its span, recording an error
// with its code as error.type.
func endSpans(c *callState, at time.Time, e *protocol.Error) {
	for _, s := range []trace.Span{c.handler, c.span} {
		if s == nil {
			continue
		}
		if e != nil {
			s.SetAttributes(semconv.ErrorTypeKey.String(string(e.Code)), attrCode.String(string(e.Code)))
			s.SetStatus(codes.Error, string(e.Code)+": "+e.Message)
		} else {
			s.SetAttributes(attrCode.String("ok"))
		}
		s.End(trace.WithTimestamp(at))
	}
	c.handler, c.span = nil, nil
}
