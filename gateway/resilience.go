package gateway

import (
	"fmt"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// resilience holds what the dispatcher needs to retry calls: a retry plan
// per tool (cached) and one breaker and budget per backend. A backend is a
// REST host ("rest:api.example.com") or an upstream MCP server
// ("upstream:fs"); in-process tools have none.
type resilience struct {
	backends *retry.Backends
	def      retry.Policy            // defaults.retry
	upstream map[string]retry.Policy // upstream source → its policy; read-only after New
	restHost map[string]string       // REST tool source → its backend; read-only after New
	plans    sync.Map                // *registry.Tool → retry.Plan
}

func newResilience(cfg *config.Config, m *metrics) *resilience {
	d := cfg.Defaults
	b := d.CircuitBreaker
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
	budget := retry.BudgetConfig{Ratio: d.RetryBudget}
	if budget.Ratio == 0 {
		budget.Ratio = -1 // 0 in the file leaves only the floor
	}
	r := &resilience{
		def:      policyOf(d.Retry),
		upstream: map[string]retry.Policy{},
		restHost: map[string]string{},
	}
	r.backends = retry.NewBackends(retry.BackendsConfig{
		Breaker:           breaker,
		Budget:            budget,
		OnState:           m.circuitState,
		OnBudgetExhausted: m.budgetExhausted,
	})
	for _, u := range cfg.Upstreams {
		if u.Retry != nil {
			r.upstream["upstream:"+u.Name] = policyOf(*u.Retry)
		}
		m.circuitState("upstream:"+u.Name, r.backends.Get("upstream:"+u.Name).State())
	}
	return r
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

// plan is the dispatcher's [executors.DispatcherOptions.Plan]: the tool's
// policy (the REST executor applies its own tool's), whether it is
// idempotent, and its backend.
func (r *resilience) plan(t *registry.Tool) retry.Plan {
	if p, ok := r.plans.Load(t); ok {
		return p.(retry.Plan)
	}
	p := retry.Plan{Policy: r.def, Idempotent: t.Idempotent, Subject: fmt.Sprintf("tool %q", t.Name)}
	switch t.Kind {
	case registry.MCP:
		if up, ok := r.upstream[t.Source]; ok {
			p.Policy = up
		}
		p.Backend = r.backends.Get(t.Source)
	case registry.REST:
		if host, ok := r.restHost[t.Source]; ok {
			p.Backend = r.backends.Get(host)
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
	states := r.backends.States()
	if len(states) == 0 {
		return nil
	}
	out := make(map[string]string, len(states))
	for name, s := range states {
		out[name] = s.String()
	}
	return out
}
