package retry

import (
	"sync"
	"time"
)

// The defaults a zero [BudgetConfig] field takes.
const (
	DefaultBudgetRatio      = 0.2
	DefaultBudgetMinRetries = 10
	DefaultBudgetWindow     = 10 * time.Second
)

// BudgetConfig configures a [Budget]. The zero value is the default
// budget: retries may add 20% to a backend's calls over the last 10s, plus
// 10 retries per 10s.
type BudgetConfig struct {
	// Disabled switches the budget off: every retry is granted.
	Disabled bool
	// Ratio is how many retries each first attempt over Window earns:
	// 0.2 lets retries add at most 20% to the calls. Zero means
	// [DefaultBudgetRatio]; a negative Ratio earns nothing, so only
	// MinRetries remain (what config's retry_budget: 0 means).
	Ratio float64
	// MinRetries is the floor: the retries granted per Window whatever the
	// call volume, so that a quiet backend can still retry. Zero means
	// [DefaultBudgetMinRetries]; negative means no floor.
	MinRetries int
	// Window is the sliding span calls and retries are counted over,
	// forgotten a tenth at a time. Zero or less means
	// [DefaultBudgetWindow].
	Window time.Duration
}

// normalize returns c with its defaults filled in and negatives resolved.
func (c BudgetConfig) normalize() BudgetConfig {
	switch {
	case c.Ratio == 0:
		c.Ratio = DefaultBudgetRatio
	case c.Ratio < 0:
		c.Ratio = 0
	}
	switch {
	case c.MinRetries == 0:
		c.MinRetries = DefaultBudgetMinRetries
	case c.MinRetries < 0:
		c.MinRetries = 0
	}
	if c.Window <= 0 {
		c.Window = DefaultBudgetWindow
	}
	return c
}

// Budget is the retry budget of one backend: it grants a retry only while
// the retries over the last Window stay below Ratio times the first
// attempts over it, plus MinRetries. When a backend struggles, every
// caller's retries would multiply its load; the budget caps that.
//
// A Budget is safe for concurrent use. A nil *Budget grants every retry.
type Budget struct {
	cfg BudgetConfig // normalized
	now func() time.Time

	mu sync.Mutex // guards w
	w  window     // kind 0: first attempts; kind 1: retries granted
}

// Kinds of event a Budget's window counts.
const (
	budgetCalls   = 0
	budgetRetries = 1
)

// NewBudget returns a budget configured by cfg (see [BudgetConfig] for
// zero values) that reads the time from now; nil now means time.Now.
func NewBudget(cfg BudgetConfig, now func() time.Time) *Budget {
	if now == nil {
		now = time.Now
	}
	cfg = cfg.normalize()
	return &Budget{cfg: cfg, now: now, w: newWindow(cfg.Window, now())}
}

// Config returns the budget's configuration, defaults filled in (a
// negative Ratio or MinRetries reads as 0).
func (b *Budget) Config() BudgetConfig {
	if b == nil {
		return BudgetConfig{Disabled: true}
	}
	return b.cfg
}

// Call records a first attempt: it earns the backend Ratio of a retry.
func (b *Budget) Call() {
	if b == nil || b.cfg.Disabled {
		return
	}
	b.mu.Lock()
	b.w.add(b.now(), budgetCalls)
	b.mu.Unlock()
}

// TryRetry consumes one retry and reports true if the budget has one: the
// retries granted over the window are fewer than Ratio × first attempts +
// MinRetries. Otherwise it reports false and consumes nothing. Call it
// only for a retry that will be made when granted.
func (b *Budget) TryRetry() bool {
	if b == nil || b.cfg.Disabled {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	calls, retries := b.w.sums(now)
	if float64(retries) >= b.cfg.Ratio*float64(calls)+float64(b.cfg.MinRetries) {
		return false
	}
	b.w.add(now, budgetRetries)
	return true
}

// explain says what the budget allows, for a message: "retries may add at
// most 20% to its calls".
func (b *Budget) explain() string {
	switch c := b.Config(); {
	case c.Disabled:
		return "it has no budget"
	case c.Ratio == 0:
		return "it allows " + pluralize(c.MinRetries, "retry", "retries") + " per " + fmtDuration(c.Window)
	default:
		return "retries may add at most " + fmtPercent(c.Ratio) + " to its calls"
	}
}
