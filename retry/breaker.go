package retry

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The defaults a zero [BreakerConfig] field takes.
const (
	DefaultBreakerFailures     = 5
	DefaultBreakerFailureRatio = 0.5
	DefaultBreakerMinCalls     = 20
	DefaultBreakerWindow       = 30 * time.Second
	DefaultBreakerOpenFor      = 30 * time.Second
)

// ErrBreakerOpen is in the chain of the error a [Breaker] refuses an
// attempt with, so that callers can tell a refusal (the backend was not
// called) from a failure of the backend: errors.Is(err, ErrBreakerOpen).
// The refusal itself is a *[Error] of class unavailable whose message
// says which backend, why and until when.
var ErrBreakerOpen = errors.New("circuit breaker open")

// BreakerConfig configures a [Breaker]. The zero value is the default
// breaker: it opens after 5 consecutive failures, or when half of at least
// 20 calls over the last 30s failed, and probes after 30s.
type BreakerConfig struct {
	// Disabled switches the breaker off: every attempt is admitted.
	Disabled bool
	// Failures is how many consecutive failures open the breaker. Zero or
	// less means [DefaultBreakerFailures].
	Failures int
	// FailureRatio also opens the breaker when, over Window, at least
	// MinCalls calls had a verdict and this fraction of them failed. Zero
	// means [DefaultBreakerFailureRatio]; negative switches the rule off
	// (what config's failure_ratio: 0 means).
	FailureRatio float64
	// MinCalls is the fewest calls over Window for FailureRatio to apply.
	// Zero or less means [DefaultBreakerMinCalls].
	MinCalls int
	// Window is the sliding span FailureRatio looks at, forgotten a tenth
	// at a time. Zero or less means [DefaultBreakerWindow].
	Window time.Duration
	// OpenFor is how long the breaker stays open before it lets one probe
	// call through. Zero or less means [DefaultBreakerOpenFor].
	OpenFor time.Duration
}

// normalize returns c with its defaults filled in.
func (c BreakerConfig) normalize() BreakerConfig {
	if c.Failures <= 0 {
		c.Failures = DefaultBreakerFailures
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = DefaultBreakerFailureRatio
	}
	if c.MinCalls <= 0 {
		c.MinCalls = DefaultBreakerMinCalls
	}
	if c.Window <= 0 {
		c.Window = DefaultBreakerWindow
	}
	if c.OpenFor <= 0 {
		c.OpenFor = DefaultBreakerOpenFor
	}
	return c
}

// State is the state of a [Breaker]. Its numeric values are stable and
// meant for a gauge: float64(s) is 0 closed, 1 open, 2 half-open.
type State int

// The states of a breaker.
const (
	StateClosed   State = iota // calls go through; failures are counted
	StateOpen                  // calls fail at once until OpenFor has passed
	StateHalfOpen              // one probe call goes through; the others fail at once
)

// String returns "closed", "open" or "half_open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half_open"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Breaker is the circuit breaker of one backend. It is closed while the
// backend is healthy. A failure, for a breaker, is an error of class
// network, timeout or unavailable: the backend could not answer. Any other
// outcome, a nil error or a failure of another class (validation,
// not_found, execution…), means the backend answered and counts as a
// success; class cancelled gives no verdict. The breaker opens after
// Failures consecutive failures, or when the FailureRatio rule holds over
// Window (both checked when a failure is recorded). While open, attempts
// are refused at once. Once OpenFor has passed, the next attempt is let
// through as a probe and the breaker is half-open: the others are refused
// until the probe's outcome closes the breaker (success, all counts
// reset) or opens it again for OpenFor (failure). A cancelled probe frees
// the slot for the next attempt.
//
// There are no timers: open becomes half-open when an attempt asks for
// admission after OpenFor. A Breaker is safe for concurrent use. A nil
// *Breaker admits everything and is always closed.
type Breaker struct {
	name    string
	cfg     BreakerConfig // normalized
	now     func() time.Time
	onState func(State) // nil: no hook

	// hookMu serializes the calls of onState, so that they come in the
	// order of the transitions. It is taken before mu, never while mu
	// is held.
	hookMu sync.Mutex

	mu          sync.Mutex // guards every field below
	state       State
	gen         uint64    // bumped by every transition; a Permit of an older one is stale
	consecutive int       // failures since the last success, while closed
	calls       window    // kind 0: successes, 1: failures, while closed
	probing     bool      // half-open: the probe is in flight
	until       time.Time // open: when the next probe may go
	why         string    // why it last opened: "after 5 consecutive failures"
	last        string    // the last failure's summary: never its message (see summarize)
	pending     []State   // transitions not yet passed to onState
}

// Kinds of outcome a Breaker's window counts.
const (
	breakerSuccesses = 0
	breakerFailures  = 1
)

// NewBreaker returns a closed breaker for the backend called name (used in
// messages), configured by cfg (see [BreakerConfig] for zero values). It
// reads the time from now; nil means time.Now. onState, when not nil, is
// called with the new state after every transition, in the order of the
// transitions, without the breaker's lock held but under a lock of its
// own: it may read [Breaker.State] but must not call [Breaker.Allow] or
// record an outcome, and should return quickly (it is meant for a gauge).
func NewBreaker(name string, cfg BreakerConfig, now func() time.Time, onState func(State)) *Breaker {
	if now == nil {
		now = time.Now
	}
	cfg = cfg.normalize()
	return &Breaker{name: name, cfg: cfg, now: now, onState: onState, calls: newWindow(cfg.Window, now())}
}

// Name returns the name of the breaker's backend.
func (b *Breaker) Name() string {
	if b == nil {
		return ""
	}
	return b.name
}

// Config returns the breaker's configuration, defaults filled in.
func (b *Breaker) Config() BreakerConfig {
	if b == nil {
		return BreakerConfig{Disabled: true}
	}
	return b.cfg
}

// State returns the breaker's state. An open breaker whose OpenFor has
// passed still reads open until an attempt asks for admission.
func (b *Breaker) State() State {
	if b == nil || b.cfg.Disabled {
		return StateClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Permit is the admission of one attempt by a [Breaker]. Pass the
// attempt's outcome to [Permit.Record], whatever it is: a probe that is
// never recorded keeps its breaker half-open, refusing everything. Only
// the first Record or [Permit.Release] of a Permit counts; later ones do
// nothing, so a caller defers Release right after the admission to cover
// the paths (a panic) that would skip Record.
//
// Record and Release change the Permit: call them on the variable that
// holds it, from one goroutine, not on copies (each copy records on its
// own). The zero Permit (from a nil or disabled breaker) records nothing.
type Permit struct {
	b     *Breaker // nil once recorded
	gen   uint64
	probe bool
}

// Probe reports whether the attempt is the probe of a half-open breaker.
func (p *Permit) Probe() bool { return p.probe }

// Record gives the breaker the outcome of the admitted attempt: err is the
// attempt's error, nil for success. It does nothing when the Permit's
// outcome was recorded (or released) already. An outcome that arrives
// after the breaker changed state since the admission (a call admitted
// before the breaker opened, say) is ignored.
func (p *Permit) Record(err error) {
	if p.b == nil {
		return
	}
	b := p.b
	p.b = nil
	b.record(*p, err)
}

// Release records that the attempt gives no verdict on the backend, as a
// cancelled attempt does: a probe's slot is freed for the next attempt,
// and no count changes. It does nothing when the outcome was recorded
// already, which makes it the guard to defer right after the admission.
func (p *Permit) Release() { p.Record(errReleased) }

// errReleased is the outcome [Permit.Release] records: class cancelled,
// which gives no verdict.
var errReleased = &Error{Class: Cancelled, Msg: "the attempt ended without an outcome"}

// Allow asks for the admission of one attempt. It returns a [Permit] to
// record the attempt's outcome with, or, when the breaker refuses, a
// *[Error] of class unavailable (with [ErrBreakerOpen] in its chain, and,
// when open, RetryAfter set to the time left before the next probe). An
// open breaker whose OpenFor has passed turns half-open and admits this
// attempt as its probe.
func (b *Breaker) Allow() (Permit, error) {
	if b == nil || b.cfg.Disabled {
		return Permit{}, nil
	}
	b.mu.Lock()
	now := b.now()
	var p Permit
	var err error
	changed := false
	switch b.state {
	case StateClosed:
		p = Permit{b: b, gen: b.gen}
	case StateOpen:
		if now.Before(b.until) {
			err = b.refusal(now, true)
			break
		}
		b.transition(StateHalfOpen)
		changed = true
		b.probing = true
		p = Permit{b: b, gen: b.gen, probe: true}
	case StateHalfOpen:
		if b.probing {
			err = b.refusal(now, true)
			break
		}
		b.probing = true
		p = Permit{b: b, gen: b.gen, probe: true}
	}
	b.mu.Unlock()
	if changed {
		b.notify()
	}
	return p, err
}

// Reset closes the breaker and forgets its counts, as when something that
// knows better than the breaker's counts (a supervisor that has just
// reconnected the backend) says the backend is healthy again. Outcomes of
// attempts admitted before the reset are ignored.
func (b *Breaker) Reset() {
	if b == nil || b.cfg.Disabled {
		return
	}
	b.mu.Lock()
	changed := b.state != StateClosed
	if changed {
		b.transition(StateClosed)
	} else {
		b.gen++
	}
	b.consecutive = 0
	b.calls.reset()
	b.probing = false
	b.why, b.last = "", ""
	b.mu.Unlock()
	if changed {
		b.notify()
	}
}

// verdict says whether an attempt's outcome counts for a breaker, and if
// so whether it is a failure.
func verdict(err error) (counts, failed bool) {
	if errors.Is(err, ErrNotBackend) {
		return false, false
	}
	switch Classify(err) {
	case Network, Timeout, Unavailable:
		return true, true
	case Cancelled, NeedsAuth: // the caller's doing, not the backend's
		return false, false
	}
	return true, false
}

// record applies the outcome err of the attempt p admitted.
func (b *Breaker) record(p Permit, err error) {
	counts, failed := verdict(err)
	b.mu.Lock()
	if p.gen != b.gen {
		b.mu.Unlock()
		return
	}
	now := b.now()
	before := b.state
	switch b.state {
	case StateClosed:
		if !counts {
			break
		}
		if !failed {
			b.consecutive = 0
			b.calls.add(now, breakerSuccesses)
			break
		}
		b.consecutive++
		b.calls.add(now, breakerFailures)
		b.last = summarize(err)
		ok, bad := b.calls.sums(now)
		switch total := ok + bad; {
		case b.consecutive >= b.cfg.Failures:
			b.open(now, "after "+pluralize(b.consecutive, "consecutive failure", "consecutive failures"))
		case b.cfg.FailureRatio > 0 && total >= b.cfg.MinCalls && float64(bad) >= b.cfg.FailureRatio*float64(total):
			b.open(now, fmt.Sprintf("after %d of %d calls failed in the last %s", bad, total, fmtDuration(b.cfg.Window)))
		}
	case StateHalfOpen:
		if !p.probe {
			break
		}
		switch {
		case !counts:
			b.probing = false // the next attempt probes
		case failed:
			b.last = summarize(err)
			b.open(now, "again after a probe call failed")
		default:
			b.transition(StateClosed)
			b.consecutive = 0
			b.calls.reset()
			b.probing = false
			b.why, b.last = "", ""
		}
	}
	changed := b.state != before
	b.mu.Unlock()
	if changed {
		b.notify()
	}
}

// open opens the breaker at now for the reason why. b.mu is held.
func (b *Breaker) open(now time.Time, why string) {
	b.transition(StateOpen)
	b.until = now.Add(b.cfg.OpenFor)
	b.why = why
	b.probing = false
	b.consecutive = 0
}

// transition sets the state, starts a new generation and queues the hook
// call. b.mu is held.
func (b *Breaker) transition(s State) {
	b.state = s
	b.gen++
	if b.onState != nil {
		b.pending = append(b.pending, s)
	}
}

// notify passes the queued transitions to onState, in order. b.mu is not
// held.
func (b *Breaker) notify() {
	if b.onState == nil {
		return
	}
	b.hookMu.Lock()
	defer b.hookMu.Unlock()
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, s := range pending {
		b.onState(s)
	}
}

// refusal returns the error an attempt is refused with at now; quoteLast
// adds the last failure's summary. b.mu is held; the state is open or
// half-open.
func (b *Breaker) refusal(now time.Time, quoteLast bool) *Error {
	last := ""
	if quoteLast && b.last != "" {
		last = " (last failure: " + b.last + ")"
	}
	e := &Error{Class: Unavailable, Err: ErrBreakerOpen}
	if b.state == StateOpen {
		left := b.until.Sub(now)
		e.RetryAfter = left
		e.Msg = fmt.Sprintf("backend %q is unavailable: its circuit breaker opened %s%s; next probe in %s", b.name, b.why, last, fmtSecondsUp(left))
	} else {
		e.Msg = fmt.Sprintf("backend %q is unavailable: its circuit breaker opened %s%s and a probe call to test it is in flight; try again shortly", b.name, b.why, last)
	}
	return e
}

// summarize describes the failure err for a breaker's refusal, which every
// caller of the backend sees: by its HTTP status when it has one ("503
// Service Unavailable", see [Error.Status]), else by its class, with the
// system-level cause of a network error when one is known ("network
// error: connection refused"). Never by its message: that may hold the
// URL, query or arguments of another caller's call. The backend's name,
// which the refusal states, says which host.
func summarize(err error) string {
	if code := statusOf(err); code != 0 {
		if text := http.StatusText(code); text != "" {
			return strconv.Itoa(code) + " " + text
		}
		return "HTTP status " + strconv.Itoa(code)
	}
	switch class := Classify(err); class {
	case Network:
		if cause := networkCause(err); cause != "" {
			return "network error: " + cause
		}
		return "network error"
	default:
		return string(class)
	}
}

// networkCause returns the cause of a network error in fixed words that
// hold nothing of the request (no address, no URL): an errno's text such
// as "connection refused", "no such host" for a DNS failure, "unexpected
// EOF"; or "" when it knows none.
func networkCause(err error) string {
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		return errno.Error()
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		if dns.IsNotFound {
			return "no such host"
		}
		return "DNS lookup failed"
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF.Error()
	case errors.Is(err, io.EOF):
		return "connection closed"
	}
	return ""
}

// refuses returns why an attempt made at the breaker's now plus wait would
// be refused, judging by the present state, or "" if it would not be. It
// changes nothing.
func (b *Breaker) refuses(wait time.Duration) string {
	if b == nil || b.cfg.Disabled {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	switch {
	case b.state == StateOpen && now.Add(wait).Before(b.until),
		b.state == StateHalfOpen && b.probing:
		return b.refusal(now, false).Msg
	}
	return ""
}
