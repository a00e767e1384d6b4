package gatewaymetrics

import (
	"maps"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	counter = &registry.Tool{Name: "counter", Kind: registry.Stateful, Source: "builtin"}
	echo    = &registry.Tool{Name: "echo", Kind: registry.Stateless, Source: "builtin"}
)

// newTest returns collectors whose sources report queued calls, dropped
// spans, the tools and instances given.
func newTest(queued int, dropped uint64, tools []*registry.Tool, instances map[string]int) *Metrics {
	return New(Sources{
		QueueLength:  func() int { return queued },
		SpansDropped: func() uint64 { return dropped },
		Tools:        func() []*registry.Tool { return tools },
		Instances:    func() map[string]int { return instances },
	})
}

// series returns the samples of the family name as "label=value,... value"
// keys, labels in the order the scrape gives them.
func series(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + float64(mt.GetHistogram().GetSampleCount())
			got[strings.Join(labels, ",")] = v
		}
	}
	return got
}

// TestHTTPResponseMetric checks toolgate_http_requests_total per tool and
// code, the cached children included.
func TestHTTPResponseMetric(t *testing.T) {
	m := newTest(0, 0, nil, nil)
	for range 3 {
		m.HTTPResponse("a", 200)
	}
	m.HTTPResponse("a", 503)
	m.HTTPResponse("b", 200)
	want := map[string]float64{"code=200,tool=a": 3, "code=503,tool=a": 1, "code=200,tool=b": 1}
	if got := series(t, m, "toolgate_http_requests_total"); !maps.Equal(got, want) {
		t.Errorf("toolgate_http_requests_total by tool and code = %v, want %v", got, want)
	}
}

// TestSourcesReadAtScrape checks that the queue length, dropped spans and
// instances come from the sources at scrape time, every stateful tool
// reported (0 without an instance) and no stateless one.
func TestSourcesReadAtScrape(t *testing.T) {
	other := &registry.Tool{Name: "notes", Kind: registry.Stateful, Source: "builtin"}
	m := newTest(4, 7, []*registry.Tool{counter, echo, other}, map[string]int{"counter": 2})
	if got := series(t, m, "toolgate_queue_length"); got[""] != 4 {
		t.Errorf("toolgate_queue_length = %v, want 4", got)
	}
	if got := series(t, m, "toolgate_trace_spans_dropped_total"); got[""] != 7 {
		t.Errorf("toolgate_trace_spans_dropped_total = %v, want 7", got)
	}
	want := map[string]float64{"tool=counter": 2, "tool=notes": 0}
	if got := series(t, m, "toolgate_thread_instances"); !maps.Equal(got, want) {
		t.Errorf("toolgate_thread_instances = %v, want %v", got, want)
	}
}

// TestObserveAndForget checks the call counters by outcome and class, and
// that a tool removed and added again under its name counts on.
func TestObserveAndForget(t *testing.T) {
	m := newTest(0, 0, nil, nil)
	m.Observe(echo, "ok", "", time.Millisecond)
	m.Observe(echo, "ok", "", time.Millisecond)
	m.Observe(echo, "error", "validation", time.Millisecond)
	m.Forget([]string{"echo"})
	again := &registry.Tool{Name: "echo", Kind: registry.Stateless, Source: "builtin"}
	m.Observe(again, "ok", "", time.Millisecond)
	want := map[string]float64{
		"error_class=,kind=stateless,outcome=ok,tool=echo":              3,
		"error_class=validation,kind=stateless,outcome=error,tool=echo": 1,
	}
	if got := series(t, m, "toolgate_tool_calls_total"); !maps.Equal(got, want) {
		t.Errorf("toolgate_tool_calls_total = %v, want %v", got, want)
	}
	if got := series(t, m, "toolgate_tool_call_duration_seconds"); got["kind=stateless,tool=echo"] != 4 {
		t.Errorf("toolgate_tool_call_duration_seconds count = %v, want 4", got)
	}
}

// TestZeroSeries checks the series exported at 0 before anything
// happened: each name repair kind and each reload result.
func TestZeroSeries(t *testing.T) {
	m := newTest(0, 0, nil, nil)
	want := map[string]float64{"kind=case": 0, "kind=namespace": 0}
	if got := series(t, m, "toolgate_name_repairs_total"); !maps.Equal(got, want) {
		t.Errorf("toolgate_name_repairs_total = %v, want %v", got, want)
	}
	want = map[string]float64{"result=ok": 0, "result=error": 0}
	if got := series(t, m, "toolgate_config_reloads_total"); !maps.Equal(got, want) {
		t.Errorf("toolgate_config_reloads_total = %v, want %v", got, want)
	}
}

// TestForgetUpstream checks that a removed upstream's series go.
func TestForgetUpstream(t *testing.T) {
	m := newTest(0, 0, nil, nil)
	m.UpstreamState("a", true)
	m.UpstreamRestart("a")
	m.UpstreamState("b", false)
	m.ForgetUpstream("a")
	if got, want := series(t, m, "toolgate_upstream_up"), map[string]float64{"upstream=b": 0}; !maps.Equal(got, want) {
		t.Errorf("toolgate_upstream_up = %v, want %v", got, want)
	}
	if got := series(t, m, "toolgate_upstream_restarts_total"); len(got) != 0 {
		t.Errorf("toolgate_upstream_restarts_total = %v, want none", got)
	}
}

// BenchmarkHTTPResponseMetric is the count of one REST attempt's response.
func BenchmarkHTTPResponseMetric(b *testing.B) {
	m := newTest(0, 0, nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		m.HTTPResponse("rest_echo", 200)
	}
}
