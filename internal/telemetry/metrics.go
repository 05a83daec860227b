package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values past these many distinct ones are reported as otherLabel:
// capability names and tool error codes come from peers, and a hostile
// peer registering names without end must not grow the metrics without
// end.
const (
	maxCapabilityLabels = 500
	maxCodeLabels       = 100
	otherLabel          = "_other"
)

// Histogram buckets, in seconds.
var (
	callBuckets     = []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	approvalBuckets = []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	appendBuckets   = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}
)

// metrics are the instruments [Telemetry] updates on every call event.
type metrics struct {
	calls            *prometheus.CounterVec   // capability, origin, side, code
	callSeconds      *prometheus.HistogramVec // capability, origin, side
	approvalSeconds  *prometheus.HistogramVec // decision
	pendingApprovals prometheus.Gauge
	inFlight         prometheus.Gauge
	appendSeconds    prometheus.Histogram
	appendErrors     prometheus.Counter

	capNames *labelSet
	codes    *labelSet
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brain_capability_calls_total",
			Help: "Capability calls finished, by capability, origin kind, side and outcome code (\"ok\" for a value).",
		}, []string{"capability", "origin", "side", "code"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "brain_capability_call_duration_seconds",
			Help:    "Time from a call's start to its outcome, approval wait included.",
			Buckets: callBuckets,
		}, []string{"capability", "origin", "side"}),
		approvalSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "brain_approval_wait_duration_seconds",
			Help:    "Time a call waited for its approval, by decision (\"none\": it ended undecided, by timeout or cancellation).",
			Buckets: approvalBuckets,
		}, []string{"decision"}),
		pendingApprovals: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "brain_pending_approvals",
			Help: "Calls waiting for an approval decision.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "brain_capability_calls_in_flight",
			Help: "Calls started and not yet finished.",
		}),
		appendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "brain_journal_append_duration_seconds",
			Help:    "Time to append one event to a session's journal (acknowledged by the store).",
			Buckets: appendBuckets,
		}),
		appendErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "brain_journal_append_errors_total",
			Help: "Journal appends that failed.",
		}),
		capNames: newLabelSet(maxCapabilityLabels),
		codes:    newLabelSet(maxCodeLabels),
	}
	reg.MustRegister(m.calls, m.callSeconds, m.approvalSeconds, m.pendingApprovals, m.inFlight, m.appendSeconds, m.appendErrors)
	return m
}

// labelSet admits at most max distinct values; later ones become
// otherLabel.
type labelSet struct {
	max  int
	mu   sync.Mutex
	seen map[string]struct{}
}

func newLabelSet(max int) *labelSet { return &labelSet{max: max, seen: map[string]struct{}{}} }

func (s *labelSet) value(v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return otherLabel
	}
	s.seen[v] = struct{}{}
	return v
}

// gauges is a collector reading [Options]' functions at scrape time.
type gauges struct {
	opts *Options

	sessions    *prometheus.Desc
	connections *prometheus.Desc
	poolSize    *prometheus.Desc
	poolInUse   *prometheus.Desc
	poolLimit   *prometheus.Desc
	discards    *prometheus.Desc
	storeReady  *prometheus.Desc
	storeServer *prometheus.Desc
}

func newGauges(o *Options) *gauges {
	return &gauges{
		opts:        o,
		sessions:    prometheus.NewDesc("brain_sessions", "Sessions, by state: live (in memory) or hibernated (only in the store).", []string{"state"}, nil),
		connections: prometheus.NewDesc("brain_connections", "Open connections by peer side: WebSocket connections, and MCP requests in flight as side mcp.", []string{"side"}, nil),
		poolSize:    prometheus.NewDesc("brain_wasm_pool_instances", "WebAssembly instances alive in a tool's pool (idle or in use).", []string{"tool"}, nil),
		poolInUse:   prometheus.NewDesc("brain_wasm_pool_instances_in_use", "WebAssembly instances of a tool's pool running a call.", []string{"tool"}, nil),
		poolLimit:   prometheus.NewDesc("brain_wasm_pool_limit", "The most instances a tool's pool may hold.", []string{"tool"}, nil),
		discards:    prometheus.NewDesc("brain_wasm_pool_discards_total", "WebAssembly instances closed and never reused (trapped, out of memory, stopped at a deadline).", []string{"tool"}, nil),
		storeReady:  prometheus.NewDesc("brain_store_ready", "1 while the session store can serve, 0 while not; state says what it knows: ok, stalled (no answer, a quorum of servers reachable: an election), no_quorum, unreachable, write_failed (the embedded server cannot write to its disk: restart once it can), closed.", []string{"state"}, nil),
		storeServer: prometheus.NewDesc("brain_store_servers", "The NATS servers the session store knows of, by whether they answered its last probe (an external server only).", []string{"reachable"}, nil),
	}
}

// Describe sends the descriptors.
func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.sessions, g.connections, g.poolSize, g.poolInUse, g.poolLimit, g.discards, g.storeReady, g.storeServer} {
		ch <- d
	}
}

// Collect reads the functions.
func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	if f := g.opts.Sessions; f != nil {
		live, hibernated := f()
		ch <- prometheus.MustNewConstMetric(g.sessions, prometheus.GaugeValue, float64(live), "live")
		ch <- prometheus.MustNewConstMetric(g.sessions, prometheus.GaugeValue, float64(hibernated), "hibernated")
	}
	if f := g.opts.Connections; f != nil {
		for side, n := range f() {
			ch <- prometheus.MustNewConstMetric(g.connections, prometheus.GaugeValue, float64(n), side)
		}
	}
	if f := g.opts.Store; f != nil {
		st := f()
		ready := 0.0
		if st.Ready {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(g.storeReady, prometheus.GaugeValue, ready, st.State)
		if st.Servers > 0 {
			ch <- prometheus.MustNewConstMetric(g.storeServer, prometheus.GaugeValue, float64(st.Reachable), "true")
			ch <- prometheus.MustNewConstMetric(g.storeServer, prometheus.GaugeValue, float64(st.Servers-st.Reachable), "false")
		}
	}
	if f := g.opts.Pools; f != nil {
		// Two attachments of one tool name share its series: sum them.
		type agg struct {
			size, inUse, limit int
			discards           uint64
		}
		by := map[string]*agg{}
		for _, p := range f() {
			a := by[p.Tool]
			if a == nil {
				a = &agg{}
				by[p.Tool] = a
			}
			a.size += p.Size
			a.inUse += p.InUse
			a.limit += p.Limit
			a.discards += p.Discards
		}
		for tool, a := range by {
			ch <- prometheus.MustNewConstMetric(g.poolSize, prometheus.GaugeValue, float64(a.size), tool)
			ch <- prometheus.MustNewConstMetric(g.poolInUse, prometheus.GaugeValue, float64(a.inUse), tool)
			ch <- prometheus.MustNewConstMetric(g.poolLimit, prometheus.GaugeValue, float64(a.limit), tool)
			ch <- prometheus.MustNewConstMetric(g.discards, prometheus.CounterValue, float64(a.discards), tool)
		}
	}
}
