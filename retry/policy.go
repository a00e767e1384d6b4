package retry

import (
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The defaults a zero [Policy] field takes.
const (
	DefaultAttempts       = 3
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
)

// MaxRetryAfter caps what [ParseRetryAfter] returns: a backend asking for
// more than a day is treated as asking for a day.
const MaxRetryAfter = 24 * time.Hour

// Policy says how often and how patiently a failed call is retried. It is a
// value: copy it freely. The zero value is usable; see [Policy.Normalize].
type Policy struct {
	// Attempts is the total number of tries, the first included; 1 means
	// no retries. Zero or less means [DefaultAttempts].
	Attempts int
	// InitialBackoff bounds the wait before the first retry; each later
	// retry doubles the bound. Zero or less means [DefaultInitialBackoff].
	InitialBackoff time.Duration
	// MaxBackoff caps every wait, a backend's Retry-After included. Zero
	// or less means [DefaultMaxBackoff]; a value below InitialBackoff is
	// raised to it.
	MaxBackoff time.Duration
	// On lists the classes of failure that may be retried. Empty means
	// [DefaultOn]: network, timeout, unavailable and rate_limited. The
	// slice is only read; a Policy may share it with its copies.
	On []Class
}

// DefaultOn returns, in a new slice, the classes a [Policy] with no On
// retries: the [Class.Transient] ones, network, timeout, unavailable and
// rate_limited.
func DefaultOn() []Class {
	return []Class{Network, Timeout, Unavailable, RateLimited}
}

// Retries reports whether p allows retrying a failure of class c: c is in
// p.On, or p.On is empty and c is [Class.Transient]. It does not look at
// attempts, idempotence or budgets; [Plan.Decide] does.
func (p Policy) Retries(c Class) bool {
	if len(p.On) == 0 {
		return c.Transient()
	}
	return slices.Contains(p.On, c)
}

// attempts returns the normalized Attempts without allocating the On that
// [Policy.Normalize] would fill in.
func (p Policy) attempts() int {
	if p.Attempts <= 0 {
		return DefaultAttempts
	}
	return p.Attempts
}

// Normalize returns p with every zero (or negative) field set to its
// default, an empty On set to [DefaultOn], and MaxBackoff raised to at
// least InitialBackoff.
func (p Policy) Normalize() Policy {
	if len(p.On) == 0 {
		p.On = DefaultOn()
	}
	if p.Attempts <= 0 {
		p.Attempts = DefaultAttempts
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = DefaultInitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = p.InitialBackoff
	}
	return p
}

// Backoff returns the wait before retry number retry (1 is the first
// retry) of the normalized p. A positive retryAfter (the backend's
// Retry-After) wins, capped at MaxBackoff. Otherwise the wait is "full
// jitter": r() scaled to [0, min(MaxBackoff, InitialBackoff*2^(retry-1))].
// r returns values in [0, 1); nil means math/rand/v2's Float64. A retry
// below 1 counts as 1.
func (p Policy) Backoff(retry int, retryAfter time.Duration, r func() float64) time.Duration {
	p = p.Normalize()
	if retryAfter > 0 {
		return min(retryAfter, p.MaxBackoff)
	}
	if r == nil {
		r = rand.Float64
	}
	retry = max(retry, 1)
	ceiling := p.MaxBackoff
	// InitialBackoff<<(retry-1) overflows quickly; compare in floats.
	if grown := float64(p.InitialBackoff) * math.Exp2(float64(retry-1)); grown < float64(p.MaxBackoff) {
		ceiling = time.Duration(grown)
	}
	f := r()
	if f < 0 || math.IsNaN(f) {
		f = 0
	}
	f = min(f, 1)
	return time.Duration(f * float64(ceiling))
}

// ParseRetryAfter parses the value of a Retry-After header: delta-seconds
// ("120") or an HTTP-date in any of the three formats [http.ParseTime]
// accepts (IMF-fixdate, RFC 850, ANSI C asctime), measured from now. ok is false for an
// empty, negative or unparsable value. A date in the past gives 0 (retry
// now). Values over [MaxRetryAfter] are capped to it.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(MaxRetryAfter/time.Second) {
			// Only a range error is possible here: all digits.
			return MaxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
