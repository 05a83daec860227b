package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerProviderFromEnv returns a tracer provider exporting over OTLP as
// the standard OpenTelemetry environment variables say, or nil when they
// do not ask for tracing — tracing is off by default. It is on when
// OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is;
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off. The
// exporter is OTLP over HTTP (protobuf), and reads the endpoint, headers,
// timeout, compression and TLS settings from OTEL_EXPORTER_OTLP_*; the
// resource reads OTEL_SERVICE_NAME (default "brain") and
// OTEL_RESOURCE_ATTRIBUTES; the sampler OTEL_TRACES_SAMPLER and its
// argument. getenv, os.Getenv when nil, decides whether tracing is on; the
// exporter itself reads the process's environment.
//
// Call shutdown when done: it flushes the spans not yet exported.
func TracerProviderFromEnv(ctx context.Context, getenv func(string) string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	none := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, none, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return nil, none, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, none, nil
		}
	case "otlp":
	default:
		return nil, none, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: brain exports traces with \"otlp\" only (or \"none\")", exp)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, none, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: brain speaks OTLP over \"http/protobuf\" only; point it at the collector's HTTP port (4318)", proto)
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("brain")),
		resource.Environment(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, none, fmt.Errorf("trace resource: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}
