package gateway

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/gatewaymetrics"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// resilience builds the one retry plan of each tool, which its calls carry
// in [executors.Call.Retry] (the dispatcher retries by it, the REST
// executor hands it to go-retryablehttp's hooks), and holds one breaker and
// budget per backend. A backend is a REST host ("rest:api.example.com") or
// an upstream MCP server ("upstream:fs"); in-process tools have none.
type resilience struct {
	m *gatewaymetrics.Metrics
	// def is defaults.retry; backends the breakers and budgets of
	// defaults.circuit_breaker and retry_budget. A reload replaces them
	// (setDefaults): calls in flight keep the plan, and so the backend,
	// they started with.
	def      atomic.Pointer[retry.Policy]
	backends atomic.Pointer[retry.Backends]
	// breaker and budget are the settings backends was built from;
	// changed only by setDefaults, which Apply serialises.
	breaker config.CircuitBreaker
	budget  float64
	// policies maps a tool source to its own retry policy, when the config
	// gives one; restHost a REST tool source to its backend. Both change
	// when a source is added or removed while serving (sources.go).
	policies sync.Map // string → retry.Policy
	restHost sync.Map // string → string
	plans    sync.Map // *registry.Tool → retry.Plan
}

func newResilience(cfg *config.Config, m *gatewaymetrics.Metrics) *resilience {
	r := &resilience{m: m}
	ups := make([]string, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		ups[i] = "upstream:" + u.Name
	}
	r.setDefaults(cfg.Defaults, ups)
	// A source's retry section overrides defaults.retry for its tools:
	// sources are named as the tools' registry.Tool.Source.
	for _, u := range cfg.Upstreams {
		r.setPolicy("upstream:"+u.Name, u.Retry)
	}
	for _, t := range cfg.Rest {
		r.setPolicy("rest:"+t.Name, t.Retry)
	}
	for _, o := range cfg.OpenAPI {
		r.setPolicy("openapi:"+o.Name, o.Retry)
	}
	return r
}

// setDefaults takes d's retry policy, and d's breaker and budget settings
// when they differ from those in force (or there are none yet): every
// backend then starts again with a closed breaker and a full budget, and
// its gauge says so, as do those of the backends named in seed. Cached
// plans are dropped: the routes are planned again (Gateway.replan). It
// reports whether anything changed.
func (r *resilience) setDefaults(d config.Defaults, seed []string) bool {
	pol := policyOf(d.Retry)
	changed := false
	if old := r.def.Load(); old == nil || !reflect.DeepEqual(*old, pol) {
		r.def.Store(&pol)
		changed = true
	}
	if old := r.backends.Load(); old == nil || r.breaker != d.CircuitBreaker || r.budget != d.RetryBudget {
		r.breaker, r.budget = d.CircuitBreaker, d.RetryBudget
		r.backends.Store(r.newBackends())
		for name := range old.States() {
			r.m.CircuitState(name, retry.StateClosed)
		}
		for _, name := range seed {
			r.m.CircuitState(name, retry.StateClosed)
		}
		changed = true
	}
	if changed {
		r.plans.Clear()
	}
	return changed
}

// newBackends builds the backends of the breaker and budget settings. A
// breaker of a set a reload replaced no longer moves the gauges: calls
// still in flight on it end there.
func (r *resilience) newBackends() *retry.Backends {
	b := r.breaker
	breaker := retry.BreakerConfig{
		Disabled:     !b.Enabled,
		Failures:     b.Failures,
		FailureRatio: b.FailureRatio,
		MinCalls:     b.MinCalls,
		Window:       b.Window.D(),
		OpenFor:      b.OpenFor.D(),
	}
	if breaker.FailureRatio == 0 {
		breaker.FailureRatio = -1 // 0 in the file switches the ratio rule off
	}
	budget := retry.BudgetConfig{Ratio: r.budget}
	if budget.Ratio == 0 {
		budget.Ratio = -1 // 0 in the file leaves only the floor
	}
	var bs *retry.Backends
	bs = retry.NewBackends(retry.BackendsConfig{
		Breaker: breaker,
		Budget:  budget,
		OnState: func(backend string, s retry.State) {
			if r.backends.Load() == bs {
				r.m.CircuitState(backend, s)
			}
		},
		OnBudgetExhausted: r.m.BudgetExhausted,
	})
	return bs
}

// backend returns the backend called name, of the set in force.
func (r *resilience) backend(name string) *retry.Backend { return r.backends.Load().Get(name) }

// setPolicy records source's own retry policy, or forgets it when c is
// nil (its tools retry by defaults.retry).
func (r *resilience) setPolicy(source string, c *config.Retry) {
	if c == nil {
		r.policies.Delete(source)
		return
	}
	r.policies.Store(source, policyOf(*c))
}

// policyOf converts a configured retry policy.
func policyOf(c config.Retry) retry.Policy {
	p := retry.Policy{Attempts: c.Attempts, InitialBackoff: c.InitialBackoff.D(), MaxBackoff: c.MaxBackoff.D()}
	for _, class := range c.On {
		p.On = append(p.On, retry.Class(class))
	}
	return p.Normalize()
}

// restBackend names the backend of a REST tool whose URL is rawURL: its
// host and port, never its userinfo, path or query.
func restBackend(rawURL string) string {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		rest = rawURL
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	return "rest:" + strings.ToLower(rest)
}

// plan returns the retry plan of t's calls, for [executors.Call.Retry]:
// the tool's source's policy (its retry section: an upstream's, a REST
// tool's, an OpenAPI source's) or else defaults.retry, whether t is
// idempotent, and its backend. It is the only place a plan is assembled,
// for every kind; plans are cached per tool until [resilience.forget].
func (r *resilience) plan(t *registry.Tool) retry.Plan {
	if p, ok := r.plans.Load(t); ok {
		return p.(retry.Plan)
	}
	p := retry.Plan{Policy: *r.def.Load(), Idempotent: t.Idempotent, Subject: fmt.Sprintf("tool %q", t.Name)}
	if own, ok := r.policies.Load(t.Source); ok {
		p.Policy = own.(retry.Policy)
	}
	switch t.Kind {
	case registry.MCP:
		p.Backend = r.backend(t.Source)
	case registry.REST:
		if host, ok := r.restHost.Load(t.Source); ok {
			p.Backend = r.backend(host.(string))
		}
	}
	v, _ := r.plans.LoadOrStore(t, p)
	return v.(retry.Plan)
}

// forget drops the cached plans of removed tools.
func (r *resilience) forget(names []string) {
	r.plans.Range(func(k, _ any) bool {
		for _, n := range names {
			if k.(*registry.Tool).Name == n {
				r.plans.Delete(k)
			}
		}
		return true
	})
}

// circuits returns every backend's breaker state, for /readyz.
func (r *resilience) circuits() map[string]string {
	states := r.backends.Load().States()
	if len(states) == 0 {
		return nil
	}
	out := make(map[string]string, len(states))
	for name, s := range states {
		out[name] = s.String()
	}
	return out
}
