// Package resilience builds the one retry plan of each tool, which its
// calls carry in executors.Call.Retry (the dispatcher retries by it, the
// REST executor hands it to go-retryablehttp's hooks), and holds one
// circuit breaker and retry budget per backend. A backend is a REST host
// ("rest:api.example.com") or an upstream MCP server ("upstream:fs");
// in-process tools have none.
//
// It reads the retry, circuit_breaker and retry_budget settings of the
// config file; it knows nothing of the gateway, and moves the metrics
// only through the [Gauges] it is given.
package resilience

import (
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Gauges are the metrics a Planner moves. A nil func is not called.
type Gauges struct {
	// CircuitState is told a backend's breaker state: each change, and
	// closed for every backend when new breakers replace the old.
	CircuitState func(backend string, s retry.State)
	// BudgetExhausted is told each retry a backend's budget refused.
	BudgetExhausted func(backend string)
}

// Planner plans the retries of each tool's calls and keeps the breaker
// and budget of each backend, under the settings in force.
type Planner struct {
	gauges Gauges
	// def is defaults.retry; backends the breakers and budgets of
	// defaults.circuit_breaker and retry_budget. A reload replaces them
	// (SetDefaults): calls in flight keep the plan, and so the backend,
	// they started with.
	def      atomic.Pointer[retry.Policy]
	backends atomic.Pointer[retry.Backends]
	// breaker and budget are the settings backends was built from;
	// changed only by SetDefaults, which the caller serialises.
	breaker config.CircuitBreaker
	budget  float64
	// policies maps a tool source to its own retry policy, when the config
	// gives one; restHost a REST tool source to its backend. Both change
	// when a source is added or removed while serving.
	policies sync.Map // string → retry.Policy
	restHost sync.Map // string → string
	// plans are the plans made, one for all the tools of a source of the
	// same kind and idempotency: 5,000 tools of an upstream share two.
	// Dropped with what they were made from (SetDefaults, SetPolicy,
	// SetRESTURL, DropSource).
	plansMu sync.Mutex
	plans   map[planKey]*retry.Plan
}

// planKey is what a plan depends on besides the settings in force.
type planKey struct {
	source     string
	kind       registry.Kind
	idempotent bool
}

// New returns the Planner of cfg's settings: defaults.retry, breakers and
// budgets, and the retry sections of its sources.
func New(cfg *config.Config, g Gauges) *Planner {
	p := &Planner{gauges: g}
	if p.gauges.CircuitState == nil {
		p.gauges.CircuitState = func(string, retry.State) {}
	}
	ups := make([]string, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		ups[i] = "upstream:" + u.Name
	}
	p.SetDefaults(cfg.Defaults, ups)
	// A source's retry section overrides defaults.retry for its tools:
	// sources are named as the tools' registry.Tool.Source.
	for _, u := range cfg.Upstreams {
		p.SetPolicy("upstream:"+u.Name, u.Retry)
	}
	for _, t := range cfg.Rest {
		p.SetPolicy("rest:"+t.Name, t.Retry)
	}
	for _, o := range cfg.OpenAPI {
		p.SetPolicy("openapi:"+o.Name, o.Retry)
	}
	return p
}

// SetDefaults takes d's retry policy, and d's breaker and budget settings
// when they differ from those in force (or there are none yet): every
// backend then starts again with a closed breaker and a full budget, and
// its gauge says so, as do those of the backends named in seed. Cached
// plans are dropped: the caller plans its routes again. It reports
// whether anything changed.
func (p *Planner) SetDefaults(d config.Defaults, seed []string) bool {
	pol := policyOf(d.Retry)
	changed := false
	if old := p.def.Load(); old == nil || !reflect.DeepEqual(*old, pol) {
		p.def.Store(&pol)
		changed = true
	}
	if old := p.backends.Load(); old == nil || p.breaker != d.CircuitBreaker || p.budget != d.RetryBudget {
		p.breaker, p.budget = d.CircuitBreaker, d.RetryBudget
		p.backends.Store(p.newBackends())
		for name := range old.States() {
			p.gauges.CircuitState(name, retry.StateClosed)
		}
		for _, name := range seed {
			p.gauges.CircuitState(name, retry.StateClosed)
		}
		changed = true
	}
	if changed {
		p.forgetPlans("")
	}
	return changed
}

// newBackends builds the backends of the breaker and budget settings. A
// breaker of a set a reload replaced no longer moves the gauges: calls
// still in flight on it end there.
func (p *Planner) newBackends() *retry.Backends {
	b := p.breaker
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
	budget := retry.BudgetConfig{Ratio: p.budget}
	if budget.Ratio == 0 {
		budget.Ratio = -1 // 0 in the file leaves only the floor
	}
	var bs *retry.Backends
	bs = retry.NewBackends(retry.BackendsConfig{
		Breaker: breaker,
		Budget:  budget,
		OnState: func(backend string, s retry.State) {
			if p.backends.Load() == bs {
				p.gauges.CircuitState(backend, s)
			}
		},
		OnBudgetExhausted: p.gauges.BudgetExhausted,
	})
	return bs
}

// Backend returns the backend called name, of the set in force.
func (p *Planner) Backend(name string) *retry.Backend { return p.backends.Load().Get(name) }

// SetPolicy records source's own retry policy, or forgets it when c is
// nil (its tools retry by defaults.retry). Plans made from then on have
// it.
func (p *Planner) SetPolicy(source string, c *config.Retry) {
	if c == nil {
		p.policies.Delete(source)
	} else {
		p.policies.Store(source, policyOf(*c))
	}
	p.forgetPlans(source)
}

// SetRESTURL records that the REST tools of source call rawURL: their
// backend is its host, whose gauge is told its breaker's state.
func (p *Planner) SetRESTURL(source, rawURL string) {
	backend := restBackend(rawURL)
	p.restHost.Store(source, backend)
	p.forgetPlans(source)
	p.gauges.CircuitState(backend, p.Backend(backend).State())
}

// DropSource forgets source's retry policy and REST backend, for a source
// removed while serving.
func (p *Planner) DropSource(source string) {
	p.policies.Delete(source)
	p.restHost.Delete(source)
	p.forgetPlans(source)
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

// Plan returns the retry plan of t's calls, for executors.Call.Retry once
// the call has set its Tool: the tool's source's policy (its retry
// section: an upstream's, a REST tool's, an OpenAPI source's) or else
// defaults.retry, whether t is idempotent, and its backend. It is the only
// place a plan is assembled, for every kind. The plan is shared with the
// other tools of t's source of the same kind and idempotency, and must not
// be modified; a tool's breaker and budget are its backend's, so shared
// already.
func (p *Planner) Plan(t *registry.Tool) *retry.Plan {
	k := planKey{t.Source, t.Kind, t.Idempotent}
	p.plansMu.Lock()
	defer p.plansMu.Unlock()
	if pl, ok := p.plans[k]; ok {
		return pl
	}
	pl := &retry.Plan{Policy: *p.def.Load(), Idempotent: t.Idempotent}
	if own, ok := p.policies.Load(t.Source); ok {
		pl.Policy = own.(retry.Policy)
	}
	switch t.Kind {
	case registry.MCP:
		pl.Backend = p.Backend(t.Source)
	case registry.REST:
		if host, ok := p.restHost.Load(t.Source); ok {
			pl.Backend = p.Backend(host.(string))
		}
	}
	if p.plans == nil {
		p.plans = make(map[planKey]*retry.Plan)
	}
	p.plans[k] = pl
	return pl
}

// forgetPlans drops the plans made for the tools of source, or every plan
// when source is "". Plan holds plansMu while it reads the settings, so a
// plan of settings replaced before forgetPlans is never kept after it.
func (p *Planner) forgetPlans(source string) {
	p.plansMu.Lock()
	defer p.plansMu.Unlock()
	if source == "" {
		clear(p.plans)
		return
	}
	for k := range p.plans {
		if k.source == source {
			delete(p.plans, k)
		}
	}
}

// Circuits returns every backend's breaker state, for /readyz; nil when
// there is no backend.
func (p *Planner) Circuits() map[string]string {
	states := p.backends.Load().States()
	if len(states) == 0 {
		return nil
	}
	out := make(map[string]string, len(states))
	for name, s := range states {
		out[name] = s.String()
	}
	return out
}
