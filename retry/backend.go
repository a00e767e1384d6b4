package retry

import (
	"sync"
	"time"
)

// Backend is what toolgate calls on behalf of tools, a REST host or an
// upstream MCP server, with its [Breaker] and its retry [Budget]. Get one
// from [Backends]; every tool that calls the backend shares it.
//
// A Backend is safe for concurrent use. A nil *Backend admits every
// attempt and grants every retry, so tools without a backend need no
// special case.
type Backend struct {
	name        string
	breaker     *Breaker // nil when breakers are disabled
	budget      *Budget  // nil when budgets are disabled
	onExhausted func(backend string)
}

// Name returns the backend's name, "" for a nil Backend.
func (b *Backend) Name() string {
	if b == nil {
		return ""
	}
	return b.name
}

// Breaker returns the backend's circuit breaker; nil (which admits
// everything) for a nil Backend or when breakers are disabled.
func (b *Backend) Breaker() *Breaker {
	if b == nil {
		return nil
	}
	return b.breaker
}

// Budget returns the backend's retry budget; nil (which grants every
// retry) for a nil Backend or when budgets are disabled.
func (b *Backend) Budget() *Budget {
	if b == nil {
		return nil
	}
	return b.budget
}

// State returns the state of the backend's breaker.
func (b *Backend) State() State { return b.Breaker().State() }

// Admit asks for the admission of attempt number attempt (from 1) of a
// call: call it before every attempt, the first and each retry. The
// breaker may refuse it (see [Breaker.Allow] for the error) or make it its
// probe. An admitted first attempt counts as a call for the retry budget.
// Pass the attempt's outcome to the returned Permit's Record.
func (b *Backend) Admit(attempt int) (Permit, error) {
	if b == nil {
		return Permit{}, nil
	}
	p, err := b.breaker.Allow()
	if err == nil && attempt <= 1 {
		b.budget.Call()
	}
	return p, err
}

// TryRetry consumes a retry from the backend's budget and reports whether
// there was one (see [Budget.TryRetry]). When there was not, it calls the
// OnBudgetExhausted hook of its [Backends].
func (b *Backend) TryRetry() bool {
	if b == nil || b.budget.TryRetry() {
		return true
	}
	if b.onExhausted != nil {
		b.onExhausted(b.name)
	}
	return false
}

// BackendsConfig configures [Backends]. The zero value gives every backend
// the default breaker and budget, the real clock and no hooks.
type BackendsConfig struct {
	// Breaker configures every backend's circuit breaker.
	Breaker BreakerConfig
	// Budget configures every backend's retry budget.
	Budget BudgetConfig
	// Now is the clock of breakers and budgets. Nil means time.Now.
	Now func() time.Time
	// OnState, when not nil, is called after every transition of a
	// backend's breaker with the new state; see [NewBreaker] for when and
	// under which constraints. It is not called when a backend is created
	// (closed): read [Backends.States] for that.
	OnState func(backend string, s State)
	// OnBudgetExhausted, when not nil, is called each time a backend's
	// budget refuses a retry, on the goroutine that asked, with no lock
	// held.
	OnBudgetExhausted func(backend string)
}

// Backends holds one [Backend] per name, created on first use with a
// shared configuration. It is safe for concurrent use. A nil *Backends
// returns nil backends (which admit everything).
type Backends struct {
	cfg BackendsConfig

	mu sync.RWMutex        // guards m
	m  map[string]*Backend // by name
}

// NewBackends returns an empty set of backends configured by cfg.
func NewBackends(cfg BackendsConfig) *Backends {
	return &Backends{cfg: cfg, m: map[string]*Backend{}}
}

// Get returns the backend called name, creating it if needed. Names are
// the caller's choice, shown in messages: "rest:api.example.com",
// "upstream:github".
func (bs *Backends) Get(name string) *Backend {
	if bs == nil {
		return nil
	}
	bs.mu.RLock()
	b := bs.m[name]
	bs.mu.RUnlock()
	if b != nil {
		return b
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b := bs.m[name]; b != nil {
		return b
	}
	b = &Backend{name: name, onExhausted: bs.cfg.OnBudgetExhausted}
	if !bs.cfg.Breaker.Disabled {
		var onState func(State)
		if hook := bs.cfg.OnState; hook != nil {
			onState = func(s State) { hook(name, s) }
		}
		b.breaker = NewBreaker(name, bs.cfg.Breaker, bs.cfg.Now, onState)
	}
	if !bs.cfg.Budget.Disabled {
		b.budget = NewBudget(bs.cfg.Budget, bs.cfg.Now)
	}
	bs.m[name] = b
	return b
}

// States returns the state of every backend's breaker, by name: for a
// readiness report or a gauge. Backends without a breaker read closed.
func (bs *Backends) States() map[string]State {
	if bs == nil {
		return map[string]State{}
	}
	bs.mu.RLock()
	backends := make([]*Backend, 0, len(bs.m))
	for _, b := range bs.m {
		backends = append(backends, b)
	}
	bs.mu.RUnlock()
	states := make(map[string]State, len(backends))
	for _, b := range backends {
		states[b.name] = b.State()
	}
	return states
}
