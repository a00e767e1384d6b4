package config

import (
	"strconv"
	"time"
)

// Failure classes, as package retry names them, that a retry policy may
// list in on, and those it may not.
var (
	retryableClasses = []string{"network", "timeout", "unavailable", "rate_limited", "execution"}
	neverRetried     = []string{"validation", "not_found", "permission", "cancelled", "internal", "needs_auth"}
	defaultRetryOn   = []string{"network", "timeout", "unavailable", "rate_limited"}
)

// Limits of the resilience settings.
const (
	maxRetryBudget     = 10
	maxParallelLimit   = 100_000
	maxQueueLimit      = 1_000_000
	maxBreakerFailures = 1000
)

// defaultBreaker is defaults.circuit_breaker when the file leaves it out.
func defaultBreaker() CircuitBreaker {
	return CircuitBreaker{
		Enabled:      true,
		Failures:     5,
		FailureRatio: 0.5,
		MinCalls:     20,
		Window:       Duration(30 * time.Second),
		OpenFor:      Duration(30 * time.Second),
	}
}

// resilience checks the retry budget, circuit breaker and concurrency
// limits in defaults.
func (c *checker) resilience(d *Defaults) {
	if d.RetryBudget < 0 || d.RetryBudget > maxRetryBudget {
		c.fail("defaults.retry_budget", strconv.FormatFloat(d.RetryBudget, 'g', -1, 64), "must be between 0 and %d, the fraction retries may add to a backend's calls, like 0.2 for 20%%", maxRetryBudget)
	}
	if b := d.CircuitBreaker; b.Enabled {
		c.breaker(b)
	}
	if d.MaxParallel < 1 || d.MaxParallel > maxParallelLimit {
		c.fail("defaults.max_parallel", strconv.Itoa(d.MaxParallel), "must be between 1 and %d", maxParallelLimit)
	}
	switch {
	case d.MaxParallelPerSession < 1:
		c.fail("defaults.max_parallel_per_session", strconv.Itoa(d.MaxParallelPerSession), "must be positive, like 16")
	case d.MaxParallel >= 1 && d.MaxParallelPerSession > d.MaxParallel:
		c.fail("defaults.max_parallel_per_session", strconv.Itoa(d.MaxParallelPerSession), "must not exceed defaults.max_parallel (%d); lower it or raise max_parallel", d.MaxParallel)
	}
	switch {
	case d.MaxParallelPerPrincipal < 0:
		c.fail("defaults.max_parallel_per_principal", strconv.Itoa(d.MaxParallelPerPrincipal), "must be positive, like 32, or 0 for half of defaults.max_parallel")
	case d.MaxParallel >= 1 && d.MaxParallelPerPrincipal > d.MaxParallel:
		c.fail("defaults.max_parallel_per_principal", strconv.Itoa(d.MaxParallelPerPrincipal), "must not exceed defaults.max_parallel (%d): it is one principal's share of it; lower it or raise max_parallel", d.MaxParallel)
	}
	if d.MaxQueue < 0 || d.MaxQueue > maxQueueLimit {
		c.fail("defaults.max_queue", strconv.Itoa(d.MaxQueue), "must be between 0 (no waiting: a call finding no free slot fails at once) and %d", maxQueueLimit)
	}
}

// breaker checks defaults.circuit_breaker, when enabled.
func (c *checker) breaker(b CircuitBreaker) {
	const p = "defaults.circuit_breaker"
	if b.Failures < 1 || b.Failures > maxBreakerFailures {
		c.fail(p+".failures", strconv.Itoa(b.Failures), "must be between 1 and %d; set enabled: false to switch breakers off", maxBreakerFailures)
	}
	if b.FailureRatio < 0 || b.FailureRatio > 1 {
		c.fail(p+".failure_ratio", strconv.FormatFloat(b.FailureRatio, 'g', -1, 64), "must be between 0 (off) and 1, like 0.5")
	}
	if b.MinCalls < 1 {
		c.fail(p+".min_calls", strconv.Itoa(b.MinCalls), "must be positive, like 20")
	}
	if b.Window <= 0 {
		c.fail(p+".window", b.Window.String(), "must be positive, like 30s")
	}
	if b.OpenFor <= 0 {
		c.fail(p+".open_for", b.OpenFor.String(), "must be positive, like 30s")
	}
}
