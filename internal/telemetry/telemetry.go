package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Options configure a [Telemetry]. A nil *Options means the defaults.
type Options struct {
	// Registry receives the metrics; nil means a new registry that also
	// holds the Go runtime's and the process's collectors.
	Registry *prometheus.Registry
	// TracerProvider records a span per call; nil means no tracing.
	TracerProvider trace.TracerProvider
	// Sessions, if set, reports the sessions live in memory and hibernated
	// (stored, not in memory), read at every scrape.
	Sessions func() (live, hibernated int)
	// Connections, if set, reports the open connections by peer side
	// (server.Server.Connections), read at every scrape.
	Connections func() map[string]int
	// Pools, if set, reports the WebAssembly instance pools, read at every
	// scrape.
	Pools func() []PoolStat
	// Store, if set, reports the session store's health (store.Health),
	// read at every scrape.
	Store func() StoreStat
	// Logger receives the package's logs; nil discards.
	Logger *slog.Logger
}

// StoreStat is the session store's health (store.Health).
type StoreStat struct {
	Ready              bool
	State              string
	Reachable, Servers int
}

// PoolStat is one WebAssembly tool's instance pool (host.PoolStats).
type PoolStat struct {
	Tool               string
	Size, InUse, Limit int
	Discards           uint64
}

// Telemetry turns call events into metrics and spans. It is safe for
// concurrent use.
type Telemetry struct {
	opts   Options
	reg    *prometheus.Registry
	m      *metrics
	tracer trace.Tracer // nil: no tracing

	mu    sync.Mutex
	calls map[callKey]*callState
	// done remembers the latest finished calls, so that an event reported
	// after its call's CallFinished (Observe runs on several goroutines)
	// does not bring the call back.
	series   map[seriesKey]*capSeries // bounded by maxCapabilityLabels × origins × sides
	done     map[callKey]struct{}
	doneRing [finishedMemory]callKey
	doneNext int
}

// finishedMemory is how many finished calls Telemetry remembers.
const finishedMemory = 4096

type callKey struct{ session, call string }

// callState is what Telemetry remembers of a call between its events.
type callState struct {
	started       time.Time // zero for a call restored without CallStarted
	approvalSince time.Time // zero unless awaiting approval
	span          trace.Span
	approval      trace.Span
	handler       trace.Span
	ctx           context.Context // span's context, the parent of the children
}

// TracerName is the instrumentation scope of brain's spans.
const TracerName = "github.com/brainrt/brain"

// New returns a Telemetry and registers its metrics.
func New(opts *Options) *Telemetry {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	t := &Telemetry{opts: o, reg: o.Registry, calls: map[callKey]*callState{}, done: map[callKey]struct{}{}, series: map[seriesKey]*capSeries{}}
	t.m = newMetrics(o.Registry)
	o.Registry.MustRegister(newGauges(&t.opts))
	if o.TracerProvider != nil {
		if _, isNoop := o.TracerProvider.(noop.TracerProvider); !isNoop {
			t.tracer = o.TracerProvider.Tracer(TracerName)
		}
	}
	return t
}

// Handler serves the metrics in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it).
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// ObserveAppend records one journal append that took d; err is its error,
// if any. It fits store.Options.OnAppend.
func (t *Telemetry) ObserveAppend(d time.Duration, err error) {
	if err != nil {
		t.m.appendErrors.Inc()
		return
	}
	t.m.appendSeconds.Observe(d.Seconds())
}

// Observe records one call event; it fits session.Options.Observe. It
// never blocks on anything but its own short lock.
func (t *Telemetry) Observe(ev session.CallEvent) {
	k := callKey{ev.Session, ev.CallID}
	t.mu.Lock()
	c := t.calls[k]
	if c == nil {
		if _, late := t.done[k]; late {
			t.mu.Unlock()
			return
		}
		// First sight of the call: normally CallStarted; another kind for a
		// call restored after a restart (or refused before it started).
		c = &callState{}
		t.calls[k] = c
		t.m.inFlight.Inc()
		if ev.Kind == session.CallStarted {
			c.started = ev.Time
		}
		t.startSpan(c, ev)
	}
	switch ev.Kind {
	case session.ApprovalRequested:
		if c.approvalSince.IsZero() {
			c.approvalSince = ev.Time
			t.m.pendingApprovals.Inc()
			c.approval = t.child(c, "approval "+ev.Name, ev.Time)
		}
	case session.ApprovalDecided:
		t.endApproval(c, ev.Time, string(ev.Decision), ev.DecidedBy)
	case session.CallDispatched:
		if c.handler == nil {
			c.handler = t.child(c, "handler "+ev.Name, ev.Time)
		}
	case session.CallFinished:
		delete(t.calls, k)
		t.rememberLocked(k)
		t.m.inFlight.Dec()
		t.endApproval(c, ev.Time, "none", "")
		t.finish(c, ev)
	}
	t.mu.Unlock()
}

// endApproval ends an approval wait, if one is running.
func (t *Telemetry) endApproval(c *callState, at time.Time, decision, by string) {
	if c.approvalSince.IsZero() {
		return
	}
	t.m.pendingApprovals.Dec()
	t.m.approvalSeconds.WithLabelValues(decision).Observe(at.Sub(c.approvalSince).Seconds())
	c.approvalSince = time.Time{}
	if c.approval != nil {
		c.approval.SetAttributes(attrDecision.String(decision))
		if by != "" {
			c.approval.SetAttributes(attrDecidedBy.String(by))
		}
		c.approval.End(trace.WithTimestamp(at))
		c.approval = nil
	}
}

// finish counts a finished call and ends its spans.
func (t *Telemetry) finish(c *callState, ev session.CallEvent) {
	code := "ok"
	if ev.Outcome.Err != nil {
		code = t.m.codes.value(string(ev.Outcome.Err.Code))
	}
	ser := t.seriesLocked(ev)
	calls := ser.byCode[code]
	if calls == nil {
		calls = t.m.calls.WithLabelValues(ser.name, ser.origin, ser.side, code)
		ser.byCode[code] = calls
	}
	calls.Inc()
	if !c.started.IsZero() {
		ser.seconds.Observe(ev.Time.Sub(c.started).Seconds())
	}
	endSpans(c, ev.Time, ev.Outcome.Err)
}

// capSeries holds a capability's metric series, so that a finished call
// does not look them up by their labels.
type capSeries struct {
	name, origin, side string
	seconds            prometheus.Observer
	byCode             map[string]prometheus.Counter
}

type seriesKey struct {
	name   string
	origin protocol.OriginKind
	side   protocol.Side
}

// seriesLocked returns the series of ev's capability. Past
// maxCapabilityLabels names, new ones share the otherLabel series.
func (t *Telemetry) seriesLocked(ev session.CallEvent) *capSeries {
	k := seriesKey{ev.Name, ev.Origin.Kind, ev.Side}
	if ser := t.series[k]; ser != nil {
		return ser
	}
	name := t.m.capNames.value(ev.Name)
	if name == otherLabel {
		k.name = otherLabel
		if ser := t.series[k]; ser != nil {
			return ser
		}
	}
	ser := &capSeries{name: name, origin: string(ev.Origin.Kind), side: string(ev.Side), byCode: map[string]prometheus.Counter{}}
	ser.seconds = t.m.callSeconds.WithLabelValues(ser.name, ser.origin, ser.side)
	t.series[k] = ser
	return ser
}

// rememberLocked adds k to the finished calls, forgetting the oldest.
func (t *Telemetry) rememberLocked(k callKey) {
	if old := t.doneRing[t.doneNext]; old != (callKey{}) {
		delete(t.done, old)
	}
	t.doneRing[t.doneNext] = k
	t.doneNext = (t.doneNext + 1) % finishedMemory
	t.done[k] = struct{}{}
}
