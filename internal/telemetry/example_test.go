package telemetry_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brainrt/brain/internal/telemetry"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// A Telemetry observes a session's calls; its handler serves /metrics.
func Example() {
	tel := telemetry.New(&telemetry.Options{Registry: prometheus.NewRegistry()})
	// session.New(id, &session.Options{Observe: tel.Observe}) reports every
	// call; here, one call's life by hand:
	start := time.Now()
	base := session.CallEvent{Session: "s1", CallID: "c1", Name: "fs.read", Side: protocol.SideAgent,
		Origin: protocol.Origin{Kind: protocol.OriginAgent}, Invoker: protocol.AudienceLLM}
	for i, kind := range []session.CallEventKind{session.CallStarted, session.CallDispatched, session.CallFinished} {
		ev := base
		ev.Kind, ev.Time = kind, start.Add(time.Duration(i)*time.Millisecond)
		if kind == session.CallFinished {
			ev.Outcome = protocol.Fail(protocol.CodeNotFound, "no such file")
		}
		tel.Observe(ev)
	}
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "brain_capability_calls_total{") {
			fmt.Print(line)
		}
	}
	// Output:
	// brain_capability_calls_total{capability="fs.read",code="not_found",origin="agent",side="agent"} 1
}
