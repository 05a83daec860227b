package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/telemetry"
	bt "github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestOTLPExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, a call's span
// reaches an OTLP/HTTP receiver, with the resource's service name.
func TestOTLPExport(t *testing.T) {
	got := make(chan []byte, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			got <- b
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL) // the exporter reads the process's environment
	t.Setenv("OTEL_SERVICE_NAME", "brain-test")
	tp, shutdown, err := telemetry.TracerProviderFromEnv(context.Background(), nil)
	if err != nil || tp == nil {
		t.Fatalf("TracerProviderFromEnv = %v, %v", tp, err)
	}
	tel := telemetry.New(&telemetry.Options{TracerProvider: tp})
	fin := at(session.CallFinished, time.Millisecond)
	fin.Outcome = protocol.Fail(protocol.CodeNotFound, "no such file")
	for _, ev := range call("c7", "fs.read", protocol.SideAgent, at(session.CallStarted, 0), at(session.CallDispatched, 0), fin) {
		tel.Observe(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bt.WaitLimit)
	defer cancel()
	if err := shutdown(ctx); err != nil { // flushes the batch
		t.Fatalf("shutdown: %v", err)
	}
	body := bt.Recv(t, got, "an OTLP export")
	for _, want := range []string{"execute_tool fs.read", "gen_ai.tool.call.id", "c7", "brain-test", "not_found"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the export lacks %q", want)
		}
	}
}
