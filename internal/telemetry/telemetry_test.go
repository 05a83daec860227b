package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/brainrt/brain/internal/telemetry"
	bt "github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// newTraced returns a Telemetry recording spans in memory.
func newTraced(t *testing.T, opts *telemetry.Options) (*telemetry.Telemetry, *tracetest.InMemoryExporter, *prometheus.Registry) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var o telemetry.Options
	if opts != nil {
		o = *opts
	}
	o.Registry = prometheus.NewRegistry()
	o.TracerProvider = tp
	return telemetry.New(&o), exp, o.Registry
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// call returns the events of one call's life.
func call(id, name string, side protocol.Side, events ...session.CallEvent) []session.CallEvent {
	for i := range events {
		events[i].Session, events[i].CallID, events[i].Name = "s1", id, name
		events[i].Side, events[i].Origin, events[i].Invoker = side, protocol.Origin{Kind: protocol.OriginClient}, protocol.AudienceLLM
		if side == protocol.SideAgent {
			events[i].Origin = protocol.Origin{Kind: protocol.OriginAgent}
		}
	}
	return events
}

func at(kind session.CallEventKind, d time.Duration) session.CallEvent {
	return session.CallEvent{Kind: kind, Time: t0.Add(d)}
}

func attrs(kv []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[string(a.Key)] = a.Value.String()
	}
	return m
}

// TestSpans: a call is one span "execute_tool <name>" with the GenAI
// attributes; its approval wait and its handler are child spans; an error
// is recorded with its code.
func TestSpans(t *testing.T) {
	tel, exp, _ := newTraced(t, nil)
	approved := at(session.ApprovalDecided, 3*time.Second)
	approved.Decision, approved.DecidedBy = protocol.DecisionApproved, "client (ada) (Ada)"
	failed := at(session.CallFinished, 5*time.Second)
	failed.Outcome = protocol.Fail(protocol.CodeTimeout, "no result within 2s")
	for _, ev := range call("c1", "ui.confirm", protocol.SideClient,
		at(session.CallStarted, 0), at(session.ApprovalRequested, time.Millisecond), approved,
		at(session.CallDispatched, 3*time.Second), failed) {
		tel.Observe(ev)
	}
	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	if len(spans) != 3 {
		t.Fatalf("spans %v, want 3", spanNames(spans))
	}
	root, ok := byName["execute_tool ui.confirm"]
	if !ok {
		t.Fatalf("no execute_tool span: %v", spanNames(spans))
	}
	a := attrs(root.Attributes)
	for k, want := range map[string]string{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ui.confirm", "gen_ai.tool.call.id": "c1",
		"gen_ai.tool.type": "extension", "error.type": "timeout", "brain.outcome.code": "timeout",
		"brain.session.id": "s1", "brain.capability.origin": "client", "brain.capability.side": "client", "brain.invoker": "llm",
	} {
		if a[k] != want {
			t.Errorf("span attribute %s = %q, want %q", k, a[k], want)
		}
	}
	if root.Status.Code != codes.Error || !strings.Contains(root.Status.Description, "timeout: no result") {
		t.Errorf("status = %+v, want an error with the code", root.Status)
	}
	if d := root.EndTime.Sub(root.StartTime); d != 5*time.Second {
		t.Errorf("span lasted %s, want 5s", d)
	}
	for name, want := range map[string]time.Duration{"approval ui.confirm": 3*time.Second - time.Millisecond, "handler ui.confirm": 2 * time.Second} {
		c, ok := byName[name]
		if !ok {
			t.Fatalf("no %q span: %v", name, spanNames(spans))
		}
		if c.Parent.SpanID() != root.SpanContext.SpanID() || c.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("%s is not a child of the call's span", name)
		}
		if d := c.EndTime.Sub(c.StartTime); d != want {
			t.Errorf("%s lasted %s, want %s", name, d, want)
		}
	}
	if a := attrs(byName["approval ui.confirm"].Attributes); a["brain.approval.decision"] != "approved" || a["brain.approval.decided_by"] != "client (ada) (Ada)" {
		t.Errorf("approval span attributes %v", a)
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestMetrics: calls are counted by capability, origin, side and code;
// durations and approval waits land in their histograms; pending approvals
// and in-flight calls go up and down.
func TestMetrics(t *testing.T) {
	tel, _, reg := newTraced(t, nil)
	ok := at(session.CallFinished, 20*time.Millisecond)
	ok.Outcome = protocol.OK(json.RawMessage(`1`))
	for _, ev := range call("a1", "math.add", protocol.SideAgent, at(session.CallStarted, 0), at(session.CallDispatched, time.Millisecond), ok) {
		tel.Observe(ev)
	}
	// a call left awaiting approval
	for _, ev := range call("c2", "ui.confirm", protocol.SideClient, at(session.CallStarted, 0), at(session.ApprovalRequested, 0)) {
		tel.Observe(ev)
	}
	expect := func(name, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), name); err != nil {
			t.Error(err)
		}
	}
	expect("brain_capability_calls_total", `
# HELP brain_capability_calls_total Capability calls finished, by capability, origin kind, side and outcome code ("ok" for a value).
# TYPE brain_capability_calls_total counter
brain_capability_calls_total{capability="math.add",code="ok",origin="agent",side="agent"} 1
`)
	expect("brain_pending_approvals", `
# HELP brain_pending_approvals Calls waiting for an approval decision.
# TYPE brain_pending_approvals gauge
brain_pending_approvals 1
`)
	expect("brain_capability_calls_in_flight", `
# HELP brain_capability_calls_in_flight Calls started and not yet finished.
# TYPE brain_capability_calls_in_flight gauge
brain_capability_calls_in_flight 1
`)
	// it is rejected after 2 s, and ends
	rej := at(session.ApprovalDecided, 2*time.Second)
	rej.Decision = protocol.DecisionRejected
	end := at(session.CallFinished, 2*time.Second)
	end.Outcome = protocol.Fail(protocol.CodeRejected, "no")
	for _, ev := range call("c2", "ui.confirm", protocol.SideClient, rej, end) {
		tel.Observe(ev)
	}
	expect("brain_pending_approvals", `
# HELP brain_pending_approvals Calls waiting for an approval decision.
# TYPE brain_pending_approvals gauge
brain_pending_approvals 0
`)
	if n := testutil.CollectAndCount(reg, "brain_capability_calls_total"); n != 2 {
		t.Errorf("%d call series, want 2", n)
	}
	if got := histogramSum(t, reg, "brain_approval_wait_duration_seconds", "decision", "rejected"); got != 2 {
		t.Errorf("approval wait sum %g, want 2", got)
	}
	if got := histogramSum(t, reg, "brain_capability_call_duration_seconds", "capability", "math.add"); got != 0.02 {
		t.Errorf("call duration sum %g, want 0.02", got)
	}
	tel.ObserveAppend(3*time.Millisecond, nil)
	tel.ObserveAppend(time.Second, errors.New("lost"))
	if got := histogramSum(t, reg, "brain_journal_append_duration_seconds", "", ""); got != 0.003 {
		t.Errorf("append sum %g, want 0.003", got)
	}
	expect("brain_journal_append_errors_total", `
# HELP brain_journal_append_errors_total Journal appends that failed.
# TYPE brain_journal_append_errors_total counter
brain_journal_append_errors_total 1
`)
}

// histogramSum returns the sample sum of the histogram series whose label
// has the value (any series when label is "").
func histogramSum(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if label == "" || lp.GetName() == label && lp.GetValue() == value {
					return m.GetHistogram().GetSampleSum()
				}
			}
			if label == "" {
				return m.GetHistogram().GetSampleSum()
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// TestCapabilityLabelsBounded: a peer registering names without end does
// not grow the metrics without end.
func TestCapabilityLabelsBounded(t *testing.T) {
	tel, _, reg := newTraced(t, nil)
	for i := range 700 {
		fin := at(session.CallFinished, 0)
		fin.Outcome = protocol.Fail(protocol.Code(fmt.Sprintf("code_%d", i)), "x")
		for _, ev := range call(fmt.Sprint("c", i), fmt.Sprint("cap.", i), protocol.SideClient, at(session.CallStarted, 0), fin) {
			tel.Observe(ev)
		}
	}
	if n := testutil.CollectAndCount(reg, "brain_capability_calls_total"); n > 501 {
		t.Errorf("%d series for 700 capability names, want at most 501", n)
	}
	if n := testutil.CollectAndCount(reg, "brain_capability_call_duration_seconds"); n > 501 {
		t.Errorf("%d histogram series, want at most 501", n)
	}
}

// TestGaugesAndHandler: the scrape-time gauges read their functions, and
// the handler serves the Prometheus text format.
func TestGaugesAndHandler(t *testing.T) {
	tel := telemetry.New(&telemetry.Options{
		Sessions:    func() (int, int) { return 3, 7 },
		Connections: func() map[string]int { return map[string]int{"client": 2, "app": 1} },
		Pools: func() []telemetry.PoolStat {
			return []telemetry.PoolStat{{Tool: "fs.read", Size: 2, InUse: 1, Limit: 4, Discards: 5}}
		},
		Store: func() telemetry.StoreStat { return telemetry.StoreStat{State: "no_quorum", Reachable: 1, Servers: 3} },
	})
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`brain_sessions{state="live"} 3`, `brain_sessions{state="hibernated"} 7`,
		`brain_connections{side="client"} 2`, `brain_connections{side="app"} 1`,
		`brain_wasm_pool_instances{tool="fs.read"} 2`, `brain_wasm_pool_instances_in_use{tool="fs.read"} 1`,
		`brain_wasm_pool_limit{tool="fs.read"} 4`, `brain_wasm_pool_discards_total{tool="fs.read"} 5`,
		`go_goroutines`, `brain_pending_approvals 0`,
		`brain_store_ready{state="no_quorum"} 0`, `brain_store_servers{reachable="true"} 1`, `brain_store_servers{reachable="false"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestSessionObserve: wired into a real session, a call's span has the
// invoker's span as parent, and a tool's own error code is counted.
func TestSessionObserve(t *testing.T) {
	tel, exp, reg := newTraced(t, nil)
	finished := make(chan session.CallEvent, 4)
	s := session.New("s9", &session.Options{Observe: func(ev session.CallEvent) {
		tel.Observe(ev)
		if ev.Kind == session.CallFinished {
			finished <- ev // the test reads the event Observe was given
		}
	}})
	err := s.RegisterAgent(protocol.Capability{
		Name: "math.double", Description: "Double a number.", Side: protocol.SideAgent,
		Origin:      protocol.Origin{Kind: protocol.OriginAgent},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}`),
	}, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		var in struct{ N float64 }
		_ = json.Unmarshal(c.Input, &in)
		if in.N < 0 {
			return nil, protocol.Errorf("negative_input", "n is negative")
		}
		return json.Marshal(in.N * 2)
	}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, parent := tp.Tracer("driver").Start(context.Background(), "turn")
	if out := s.Invoke(ctx, protocol.AudienceLLM, "math.double", json.RawMessage(`{"n":2}`)); string(out.Value) != "4" {
		t.Fatalf("outcome %+v", out)
	}
	parent.End()
	bt.Recv(t, finished, "the call's CallFinished")
	var root tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		if sp.Name == "execute_tool math.double" {
			root = sp
		}
	}
	if root.Name == "" {
		t.Fatalf("no execute_tool span: %v", spanNames(exp.GetSpans()))
	}
	if root.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("the call's span is not a child of the invoker's span")
	}
	if a := attrs(root.Attributes); a["gen_ai.tool.type"] != "function" || a["brain.outcome.code"] != "ok" {
		t.Errorf("attributes %v", a)
	}
	_ = s.Invoke(ctx, protocol.AudienceLLM, "math.double", json.RawMessage(`{"n":-1}`))
	bt.Recv(t, finished, "the second call's CallFinished")
	// A call refused before it starts is counted too.
	_ = s.Invoke(ctx, protocol.AudienceLLM, "math.double", json.RawMessage(`{"n":"two"}`))
	bt.Recv(t, finished, "the refused call's CallFinished")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP brain_capability_calls_total Capability calls finished, by capability, origin kind, side and outcome code ("ok" for a value).
# TYPE brain_capability_calls_total counter
brain_capability_calls_total{capability="math.double",code="invalid_input",origin="agent",side="agent"} 1
brain_capability_calls_total{capability="math.double",code="negative_input",origin="agent",side="agent"} 1
brain_capability_calls_total{capability="math.double",code="ok",origin="agent",side="agent"} 1
`), "brain_capability_calls_total"); err != nil {
		t.Error(err)
	}
}

// TestNoTracing: without a tracer provider nothing is traced and metrics
// still work.
func TestNoTracing(t *testing.T) {
	reg := prometheus.NewRegistry()
	tel := telemetry.New(&telemetry.Options{Registry: reg})
	fin := at(session.CallFinished, time.Second)
	for _, ev := range call("c1", "x", protocol.SideClient, at(session.CallStarted, 0), at(session.CallDispatched, 0), fin) {
		tel.Observe(ev)
	}
	if n := testutil.CollectAndCount(reg, "brain_capability_calls_total"); n != 1 {
		t.Errorf("%d series", n)
	}
}

// TestLateEventIgnored: an event reported after its call's CallFinished
// (Observe runs on several goroutines) does not bring the call back.
func TestLateEventIgnored(t *testing.T) {
	tel, exp, reg := newTraced(t, nil)
	late := at(session.ApprovalDecided, 2*time.Second)
	late.Decision = protocol.DecisionApproved
	for _, ev := range call("c1", "ui.x", protocol.SideClient, at(session.CallStarted, 0), at(session.ApprovalRequested, 0), at(session.CallFinished, time.Second), late) {
		tel.Observe(ev)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP brain_capability_calls_in_flight Calls started and not yet finished.
# TYPE brain_capability_calls_in_flight gauge
brain_capability_calls_in_flight 0
# HELP brain_pending_approvals Calls waiting for an approval decision.
# TYPE brain_pending_approvals gauge
brain_pending_approvals 0
`), "brain_capability_calls_in_flight", "brain_pending_approvals"); err != nil {
		t.Error(err)
	}
	if n := len(exp.GetSpans()); n != 2 { // execute_tool and its approval, once
		t.Errorf("%d spans %v, want 2", n, spanNames(exp.GetSpans()))
	}
}

// TestTracerProviderFromEnv: tracing is off unless the OTEL_* variables
// ask for OTLP; what brain cannot do is an error naming the variable.
func TestTracerProviderFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{"nothing set", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, ""},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, ""},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "OTEL_TRACES_EXPORTER"},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_PROTOCOL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, shutdown, err := telemetry.TracerProviderFromEnv(context.Background(), func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tp != nil) != tt.on {
				t.Fatalf("tracer provider %v, want on=%v", tp, tt.on)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = shutdown(ctx) // nothing exported: returns at once
		})
	}
}
