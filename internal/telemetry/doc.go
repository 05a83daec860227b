// Package telemetry turns the life of every capability call into Prometheus
// metrics and OpenTelemetry traces, for `brain serve`.
//
// A [Telemetry] is fed by session.Options.Observe ([Telemetry.Observe]):
// each call's start, approval request and decision, dispatch and finish.
// From them it counts calls by capability, origin kind, side and outcome
// code, times calls and approval waits, tracks pending approvals, and —
// when given a tracer provider — records one span per call following the
// OpenTelemetry GenAI semantic conventions for tool execution
// ("execute_tool <name>", gen_ai.operation.name, gen_ai.tool.name,
// gen_ai.tool.call.id), with the approval wait and the handler as child
// spans and an error's code as error.type. Gauges read at scrape time
// (sessions, connections, WebAssembly pools) come from functions given in
// [Options]; the journal's append latency from [Telemetry.ObserveAppend].
//
// [Telemetry.Handler] serves the metrics in the Prometheus text format;
// [TracerProviderFromEnv] builds an OTLP exporter from the standard
// OTEL_* environment variables, off unless they ask for one.
// docs/operations.md lists every metric.
package telemetry
