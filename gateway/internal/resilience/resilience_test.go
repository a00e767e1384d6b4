package resilience

import (
	"maps"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gauges records what a Planner tells its Gauges.
type gauges struct {
	states    []string // "backend state"
	exhausted []string
}

func (g *gauges) Gauges() Gauges {
	return Gauges{
		CircuitState:    func(b string, s retry.State) { g.states = append(g.states, b+" "+s.String()) },
		BudgetExhausted: func(b string) { g.exhausted = append(g.exhausted, b) },
	}
}

// newConfig returns the default configuration with an upstream "x", a
// REST tool "own" with its own retry section and one "plain" without.
func newConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Default(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Defaults.Retry = config.Retry{Attempts: 3, InitialBackoff: config.Duration(time.Millisecond), MaxBackoff: config.Duration(2 * time.Millisecond)}
	cfg.Upstreams = []config.Upstream{{Name: "x"}}
	cfg.Rest = []config.RESTTool{{Name: "own", Retry: &config.Retry{Attempts: 1}}, {Name: "plain"}}
	return cfg
}

// A tool's plan takes its source's own retry policy over defaults.retry,
// and its backend: an upstream's by name, a REST tool's by host, none for
// an in-process tool. A changed policy or URL reaches the plans made
// after it.
func TestPlan(t *testing.T) {
	p := New(newConfig(t), Gauges{})
	p.SetRESTURL("rest:own", "https://user:secret@API.example.com:8443/v1?key=k")
	p.SetRESTURL("rest:plain", "http://127.0.0.1:9/x")
	up := &registry.Tool{Name: "x__read", Source: "upstream:x", Kind: registry.MCP, Idempotent: true}
	own := &registry.Tool{Name: "own", Source: "rest:own", Kind: registry.REST}
	plain := &registry.Tool{Name: "plain", Source: "rest:plain", Kind: registry.REST}
	local := &registry.Tool{Name: "echo", Source: "builtin", Kind: registry.Stateless}

	tests := []struct {
		tool     *registry.Tool
		attempts int
		backend  string // "" for none
	}{
		{up, 3, "upstream:x"},
		{own, 1, "rest:api.example.com:8443"},
		{plain, 3, "rest:127.0.0.1:9"},
		{local, 3, ""},
	}
	for _, tc := range tests {
		pl := p.Plan(tc.tool)
		if pl.Policy.Attempts != tc.attempts || pl.Idempotent != tc.tool.Idempotent {
			t.Errorf("Plan(%s) = %d attempts, idempotent %v; want %d, %v", tc.tool.Name, pl.Policy.Attempts, pl.Idempotent, tc.attempts, tc.tool.Idempotent)
		}
		if got := pl.Backend.Name(); got != tc.backend || tc.backend != "" && pl.Backend != p.Backend(tc.backend) {
			t.Errorf("Plan(%s).Backend = %q, want %q of the set in force", tc.tool.Name, got, tc.backend)
		}
		if pl.Subject != "" || pl.Tool != "" {
			t.Errorf("Plan(%s) names %q, tool %q; want neither: the plan is shared, each call names its tool", tc.tool.Name, pl.Subject, pl.Tool)
		}
	}

	p.SetPolicy("upstream:x", &config.Retry{Attempts: 5})
	if got := p.Plan(up).Policy.Attempts; got != 5 {
		t.Errorf("the plan after SetPolicy = %d attempts, want the source's 5", got)
	}
	p.SetRESTURL("rest:plain", "http://127.0.0.2:9/x")
	if got := p.Plan(plain).Backend.Name(); got != "rest:127.0.0.2:9" {
		t.Errorf("the backend after SetRESTURL = %q, want rest:127.0.0.2:9", got)
	}
	p.DropSource("rest:own")
	if pl := p.Plan(own); pl.Policy.Attempts != 3 || pl.Backend != nil {
		t.Errorf("a dropped source's plan = %d attempts, backend %v; want defaults.retry and no backend", pl.Policy.Attempts, pl.Backend)
	}
}

// The tools of a source share one plan per kind and idempotency (5,000
// tools of an upstream hold two), never with another source's tools: a
// source with its own retry section keeps its own policy, and each
// upstream its own breaker.
func TestPlanShared(t *testing.T) {
	cfg := newConfig(t)
	cfg.Upstreams = []config.Upstream{{Name: "x"}, {Name: "y"}, {Name: "z", Retry: &config.Retry{Attempts: 1}}}
	cfg.Defaults.CircuitBreaker = config.CircuitBreaker{Enabled: true, Failures: 1}
	p := New(cfg, Gauges{})
	tool := func(source, name string, idempotent bool) *registry.Tool {
		return &registry.Tool{Name: name, Source: "upstream:" + source, Kind: registry.MCP, Idempotent: idempotent}
	}
	x1, x2 := p.Plan(tool("x", "x__a", true)), p.Plan(tool("x", "x__b", true))
	if x1 != x2 {
		t.Error("two idempotent tools of upstream x have two plans, want one shared")
	}
	if xn := p.Plan(tool("x", "x__c", false)); xn == x1 || xn.Idempotent {
		t.Errorf("a non-idempotent tool of x shares the idempotent tools' plan (idempotent %v)", xn.Idempotent)
	}
	y := p.Plan(tool("y", "y__a", true))
	if y == x1 || y.Backend == x1.Backend {
		t.Fatal("upstreams x and y share a plan or a backend")
	}
	if z := p.Plan(tool("z", "z__a", true)); z.Policy.Attempts != 1 || x1.Policy.Attempts != 3 {
		t.Errorf("attempts: z (its own retry section) %d, x %d; want 1, 3", z.Policy.Attempts, x1.Policy.Attempts)
	}
	permit, err := x1.Backend.Admit(1)
	if err != nil {
		t.Fatal(err)
	}
	permit.Record(retry.Errorf(retry.Unavailable, "down")) // failures: 1 opens x's breaker
	if x1.Backend.State() != retry.StateOpen || y.Backend.State() != retry.StateClosed {
		t.Errorf("breakers after x failed: x %v, y %v; want open, closed", x1.Backend.State(), y.Backend.State())
	}
}

// A REST tool's backend is its host and port, lower-cased, never its
// userinfo (a secret), path or query.
func TestRESTBackend(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:secret@API.example.com:8443/v1?key=k": "rest:api.example.com:8443",
		"http://127.0.0.1:9":     "rest:127.0.0.1:9",
		"api.example.com/x#frag": "rest:api.example.com",
		"http://a@b@host?q=@":    "rest:host",
	} {
		if got := restBackend(in); got != want {
			t.Errorf("restBackend(%q) = %q, want %q", in, got, want)
		}
	}
}

// SetDefaults: a change of the retry policy only keeps the backends (and
// their breakers' state); a change of the breaker settings gives every
// backend a new, closed breaker, and the gauges of the old backends and
// of the seeds say closed; no change is reported as none.
func TestSetDefaults(t *testing.T) {
	var g gauges
	cfg := newConfig(t)
	cfg.Defaults.CircuitBreaker = config.CircuitBreaker{Enabled: true, Failures: 1}
	p := New(cfg, g.Gauges())
	if want := []string{"upstream:x closed"}; !slices.Equal(g.states, want) {
		t.Errorf("gauges at start = %q, want %q", g.states, want)
	}
	up := &registry.Tool{Name: "x__read", Source: "upstream:x", Kind: registry.MCP}
	before := p.Plan(up).Backend
	permit, err := before.Admit(1)
	if err != nil {
		t.Fatal(err)
	}
	permit.Record(retry.Errorf(retry.Unavailable, "down"))
	if before.State() != retry.StateOpen || g.states[len(g.states)-1] != "upstream:x open" {
		t.Fatalf("after one failure with failures: 1: state %v, gauges %q; want open and told", before.State(), g.states)
	}

	d := cfg.Defaults
	if p.SetDefaults(d, nil) {
		t.Error("SetDefaults of the settings in force reported a change")
	}
	d.Retry.Attempts = 2
	if !p.SetDefaults(d, nil) {
		t.Error("a changed defaults.retry was not reported")
	}
	if p.Backend("upstream:x") != before || p.Plan(up).Policy.Attempts != 2 {
		t.Error("a retry-only change replaced the backends, or the plan kept the old policy")
	}

	g.states = nil
	d.CircuitBreaker.Failures = 2
	if !p.SetDefaults(d, []string{"upstream:y"}) {
		t.Error("a changed circuit_breaker was not reported")
	}
	after := p.Plan(up).Backend
	if after == before || after.State() != retry.StateClosed || after.Breaker().Config().Failures != 2 {
		t.Errorf("after failures went to 2: same backend %v, state %v, failures %d; want a new closed breaker of 2", after == before, after.State(), after.Breaker().Config().Failures)
	}
	slices.Sort(g.states)
	if want := []string{"upstream:x closed", "upstream:y closed"}; !slices.Equal(g.states, want) {
		t.Errorf("gauges after the breakers were replaced = %q, want %q", g.states, want)
	}
	g.states = nil
	before.Breaker().Reset() // a breaker of the old set no longer moves the gauges
	if len(g.states) != 0 {
		t.Errorf("an old breaker moved the gauges: %q", g.states)
	}
	if got, want := p.Circuits(), map[string]string{"upstream:x": "closed"}; !maps.Equal(got, want) {
		t.Errorf("Circuits() = %v, want %v", got, want)
	}
}

// A retry its backend's budget refuses is counted: retry_budget 0 leaves
// only the floor of retries per window.
func TestBudgetExhausted(t *testing.T) {
	var g gauges
	cfg := newConfig(t)
	cfg.Defaults.RetryBudget = 0
	p := New(cfg, g.Gauges())
	b := p.Backend("upstream:x")
	granted := 0
	for range retry.DefaultBudgetMinRetries + 1 {
		if b.TryRetry() {
			granted++
		}
	}
	if granted != retry.DefaultBudgetMinRetries || !slices.Equal(g.exhausted, []string{"upstream:x"}) {
		t.Errorf("%d retries granted, exhausted told %q; want %d and once for upstream:x", granted, g.exhausted, retry.DefaultBudgetMinRetries)
	}
}
