package gatewaymetrics

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/internal/buildinfo"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Metrics are the gateway's Prometheus collectors, in a registry of its
// own. Its methods are safe for concurrent use.
type Metrics struct {
	reg          *prometheus.Registry
	calls        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	inFlight     prometheus.Gauge
	sessions     prometheus.Gauge
	unknownTools prometheus.Counter
	nameRepairs  *prometheus.CounterVec
	httpRequests *prometheus.CounterVec
	retries      *prometheus.CounterVec
	upstreamUp   *prometheus.GaugeVec
	restarts     *prometheus.CounterVec
	relists      *prometheus.CounterVec
	queueWait    prometheus.Histogram
	circuit      *prometheus.GaugeVec
	exhausted    *prometheus.CounterVec
	reloads      *prometheus.CounterVec
	endpoints    *prometheus.CounterVec
	cacheCalls   *prometheus.CounterVec

	perTool  sync.Map // *registry.Tool → *toolMetrics, to skip label hashing on the hot path
	httpByTC sync.Map // toolCode → prometheus.Counter, the children of httpRequests, likewise
}

// toolCode keys the cached children of toolgate_http_requests_total.
type toolCode struct {
	tool string
	code int
}

// toolMetrics are one tool's children of the call metrics for a successful
// call.
type toolMetrics struct {
	ok       prometheus.Counter
	duration prometheus.Observer
}

// Sources are what the collectors read from the gateway at scrape time.
// Each func is called only during a scrape.
type Sources struct {
	// QueueLength is how many tool calls wait for a free slot
	// (toolgate_queue_length).
	QueueLength func() int
	// SpansDropped is how many trace spans were dropped
	// (toolgate_trace_spans_dropped_total).
	SpansDropped func() uint64
	// Tools are the registered tools; the stateful ones are reported in
	// toolgate_thread_instances.
	Tools func() []*registry.Tool
	// Instances are the live per-thread instances by tool name.
	Instances func() map[string]int
}

// New returns the collectors, registered in a new registry with those
// reading src.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_calls_total",
			Help: "Tool calls that reached a registered tool, by outcome (ok or error) and error class.",
		}, []string{"tool", "kind", "outcome", "error_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_tool_call_duration_seconds",
			Help:    "Duration of tool calls through the whole pipeline.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"tool", "kind"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolgate_tool_calls_in_flight",
			Help: "Tool calls currently running.",
		}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolgate_sessions",
			Help: "Open MCP sessions (streamable HTTP, SSE and stdio).",
		}),
		unknownTools: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_unknown_tool_calls_total",
			Help: "Calls naming a tool that does not exist (answered with JSON-RPC -32602).",
		}),
		nameRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_name_repairs_total",
			Help: "Calls whose tool name was repaired (guards.name_repair), by kind: case (case or separators) or namespace (a missing or wrong namespace).",
		}, []string{"kind"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_http_requests_total",
			Help: "HTTP requests made by REST tools (each attempt), by status code.",
		}, []string{"tool", "code"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_retries_total",
			Help: "Retries of tool calls, by the class of the failure retried.",
		}, []string{"tool", "error_class"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolgate_queue_wait_seconds",
			Help:    "Time tool calls waited for a free slot under defaults.max_parallel and max_parallel_per_session (0 when one was free).",
			Buckets: []float64{0, .001, .005, .01, .05, .1, .5, 1, 5, 30},
		}),
		circuit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_circuit_state",
			Help: "State of each backend's circuit breaker: 0 closed, 1 open, 2 half-open.",
		}, []string{"backend"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_retry_budget_exhausted_total",
			Help: "Failures returned without retry because the backend's retry budget was spent.",
		}, []string{"backend"}),
		upstreamUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_upstream_up",
			Help: "1 while the upstream MCP server is connected and its tools are listed, else 0.",
		}, []string{"upstream"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_upstream_restarts_total",
			Help: "Reconnections of upstream MCP servers after a failure.",
		}, []string{"upstream"}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_upstream_list_changed_total",
			Help: "list_changed notifications of upstream MCP servers (tools, resources, prompts): outcome listed made toolgate list again, coalesced was folded into a listing already pending (listings are paced: at most one every 2 s per kind).",
		}, []string{"upstream", "outcome"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_config_reloads_total",
			Help: "Configuration reloads (SIGHUP or a changed file), by result: ok (applied) or error (invalid; the configuration before it still serves).",
		}, []string{"result"}),
		endpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_endpoint_calls_total",
			Help: "Tool calls made through a configured endpoint (config endpoints), by endpoint and outcome (ok or error); calls through the default endpoint are not counted here.",
		}, []string{"endpoint", "outcome"}),
		cacheCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_cache_requests_total",
			Help: "Calls of tools with a result cache (docs/cache.md), by result: hit (answered from the cache, or by an identical call running at the time) or miss (the backend was called).",
		}, []string{"tool", "result"}),
	}
	m.reg.MustRegister(m.calls, m.duration, m.inFlight, m.sessions, m.unknownTools, m.nameRepairs, m.httpRequests, m.retries,
		m.upstreamUp, m.restarts, m.relists, m.queueWait, m.circuit, m.exhausted, m.reloads, m.endpoints, m.cacheCalls,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "toolgate_queue_length",
			Help: "Tool calls waiting for a free slot: of max_parallel (at most defaults.max_queue), or of their session's max_parallel_per_session (at most defaults.max_queue more).",
		}, func() float64 { return float64(src.QueueLength()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolgate_trace_spans_dropped_total",
			Help: "Trace spans dropped because the OpenTelemetry collector was down or slow: the export queue (telemetry.queue_size) was full or an export failed. Always 0 without tracing.",
		}, func() float64 { return float64(src.SpansDropped()) }),
		&instancesCollector{tools: src.Tools, instances: src.Instances},
		buildInfoGauge(buildinfo.Read()),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, k := range []registry.RepairKind{registry.RepairCase, registry.RepairNamespace} {
		m.nameRepairs.WithLabelValues(string(k)) // exported at 0
	}
	for _, r := range []string{"ok", "error"} {
		m.reloads.WithLabelValues(r) // exported at 0
	}
	return m
}

// buildInfoGauge is toolgate_build_info: always 1, its labels say which
// build is running, so that a dashboard can tell replicas apart after a
// rollout.
func buildInfoGauge(bi buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "toolgate_build_info",
		Help:        "Always 1; the labels name the running build: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "go_version": bi.GoVersion},
	})
	g.Set(1)
	return g
}

// Registry is the registry of m's collectors, which /metrics serves and
// other parts of the gateway register theirs in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// CallStarted and CallEnded bracket a tool call in
// toolgate_tool_calls_in_flight.
func (m *Metrics) CallStarted() { m.inFlight.Inc() }

// CallEnded: see [Metrics.CallStarted].
func (m *Metrics) CallEnded() { m.inFlight.Dec() }

// Observe counts a call of t that ended with outcome (ok or error) and,
// for an error, class, after d.
func (m *Metrics) Observe(t *registry.Tool, outcome, class string, d time.Duration) {
	v, ok := m.perTool.Load(t)
	if !ok {
		v, _ = m.perTool.LoadOrStore(t, &toolMetrics{
			ok:       m.calls.WithLabelValues(t.Name, string(t.Kind), "ok", ""),
			duration: m.duration.WithLabelValues(t.Name, string(t.Kind)),
		})
	}
	tm := v.(*toolMetrics)
	tm.duration.Observe(d.Seconds())
	if outcome == "ok" {
		tm.ok.Inc()
		return
	}
	m.calls.WithLabelValues(t.Name, string(t.Kind), outcome, class).Inc()
}

// Forget drops the cached children of removed tools.
func (m *Metrics) Forget(names []string) {
	m.perTool.Range(func(k, _ any) bool {
		if slices.Contains(names, k.(*registry.Tool).Name) {
			m.perTool.Delete(k)
		}
		return true
	})
}

// HTTPResponse counts one REST attempt's response. A tool's children stay
// cached after it is removed, as the vector keeps them: one per tool and
// status code it has seen.
func (m *Metrics) HTTPResponse(tool string, code int) {
	k := toolCode{tool, code}
	c, ok := m.httpByTC.Load(k)
	if !ok {
		c, _ = m.httpByTC.LoadOrStore(k, m.httpRequests.WithLabelValues(tool, strconv.Itoa(code)))
	}
	c.(prometheus.Counter).Inc()
}

// Retry counts a retry of a call of tool after a failure of class.
func (m *Metrics) Retry(tool string, class retry.Class) {
	m.retries.WithLabelValues(tool, string(class)).Inc()
}

// UpstreamState sets whether upstream is connected with its tools listed.
func (m *Metrics) UpstreamState(upstream string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.upstreamUp.WithLabelValues(upstream).Set(v)
}

// ForgetUpstream drops the series of an upstream that was removed.
func (m *Metrics) ForgetUpstream(upstream string) {
	m.upstreamUp.DeleteLabelValues(upstream)
	m.restarts.DeleteLabelValues(upstream)
}

// UpstreamRestart counts a reconnection of upstream after a failure.
func (m *Metrics) UpstreamRestart(upstream string) {
	m.restarts.WithLabelValues(upstream).Inc()
}

// UpstreamRelist counts a list_changed of upstream: listed again, or
// coalesced into a pending listing.
func (m *Metrics) UpstreamRelist(upstream string, listed bool) {
	outcome := "coalesced"
	if listed {
		outcome = "listed"
	}
	m.relists.WithLabelValues(upstream, outcome).Inc()
}

var instancesDesc = prometheus.NewDesc("toolgate_thread_instances",
	"Live per-thread instances of stateful tools.", []string{"tool"}, nil)

// instancesCollector reads the thread pool's counts at scrape time, so the
// pool needs no metrics hooks. Every stateful tool is reported, with 0 when
// it has no live instance.
type instancesCollector struct {
	tools     func() []*registry.Tool
	instances func() map[string]int
}

func (c *instancesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- instancesDesc }

func (c *instancesCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.instances()
	for _, t := range c.tools() {
		if t.Kind == registry.Stateful {
			ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(counts[t.Name]), t.Name)
		}
	}
}

// needsAuthDesc is the metric of the upstreams waiting for a person.
var needsAuthDesc = prometheus.NewDesc("toolgate_upstream_needs_auth",
	"1 while an upstream waits for a person to authorize it (toolgate auth login), else 0; only upstreams with oauth.",
	[]string{"upstream"}, nil)

// NeedsAuth collects toolgate_upstream_needs_auth from the upstreams'
// authorization state at scrape time, as a reload leaves it: WithOAuth
// names the upstreams that have oauth, Waiting (its keys) those of them
// waiting for a person.
type NeedsAuth struct {
	WithOAuth func() []string
	Waiting   func() map[string]string
}

func (c NeedsAuth) Describe(ch chan<- *prometheus.Desc) { ch <- needsAuthDesc }

func (c NeedsAuth) Collect(ch chan<- prometheus.Metric) {
	waiting := c.Waiting()
	for _, n := range c.WithOAuth() {
		v := 0.0
		if _, ok := waiting[n]; ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(needsAuthDesc, prometheus.GaugeValue, v, n)
	}
}

// CircuitState sets the state of backend's circuit breaker.
func (m *Metrics) CircuitState(backend string, s retry.State) {
	m.circuit.WithLabelValues(backend).Set(float64(s))
}

// CacheRequest counts a call of a cached tool: a hit or a miss.
func (m *Metrics) CacheRequest(t *registry.Tool, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	m.cacheCalls.WithLabelValues(t.Name, result).Inc()
}

// BudgetExhausted counts a failure of backend returned without retry
// because its retry budget was spent.
func (m *Metrics) BudgetExhausted(backend string) {
	m.exhausted.WithLabelValues(backend).Inc()
}

// EndpointCall counts a call through a configured endpoint that ended
// with outcome (ok or error).
func (m *Metrics) EndpointCall(endpoint, outcome string) {
	m.endpoints.WithLabelValues(endpoint, outcome).Inc()
}

// QueueWait observes how long a call waited for a free slot.
func (m *Metrics) QueueWait(d time.Duration) { m.queueWait.Observe(d.Seconds()) }

// UnknownTool counts a call naming a tool that does not exist.
func (m *Metrics) UnknownTool() { m.unknownTools.Inc() }

// NameRepair counts a call whose tool name was repaired, by kind.
func (m *Metrics) NameRepair(kind registry.RepairKind) {
	m.nameRepairs.WithLabelValues(string(kind)).Inc()
}

// SessionOpened and SessionClosed count an MCP session in
// toolgate_sessions.
func (m *Metrics) SessionOpened() { m.sessions.Inc() }

// SessionClosed: see [Metrics.SessionOpened].
func (m *Metrics) SessionClosed() { m.sessions.Dec() }

// Reload counts a configuration reload by result: ok or error.
func (m *Metrics) Reload(result string) {
	m.reloads.WithLabelValues(result).Inc()
}
