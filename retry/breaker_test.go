package retry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/retry/retrytest"
)

// refusedDial is the error of a refused connection, as net's dialer
// returns it.
var refusedDial = &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 443}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

var (
	errRefused   = &Error{Class: Network, Msg: refusedDial.Error(), Err: refusedDial}
	errSlow      = Errorf(Timeout, "no answer in 5s")
	errDown      = &Error{Class: Unavailable, Msg: "503 Service Unavailable", Status: 503}
	errLimited   = Errorf(RateLimited, "429 Too Many Requests")
	errBadInput  = Errorf(Validation, "missing argument")
	errCancelled = Wrap(Cancelled, "", context.Canceled)
)

// step is one attempt through a breaker: advance the clock, ask for
// admission, record err.
type step struct {
	advance time.Duration
	err     error
}

func repeat(n int, err error) []step {
	s := make([]step, n)
	for i := range s {
		s[i] = step{err: err}
	}
	return s
}

func seq(parts ...[]step) []step {
	var s []step
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func TestBreakerOpens(t *testing.T) {
	ratioCfg := BreakerConfig{Failures: 100, MinCalls: 10, FailureRatio: 0.5, Window: 10 * time.Second}
	alternate := func(n int, first, second error) []step {
		var s []step
		for range n {
			s = append(s, step{err: first}, step{err: second})
		}
		return s
	}
	tests := []struct {
		name    string
		cfg     BreakerConfig
		steps   []step
		want    State
		wantWhy string // in the refusal's message, when open
	}{
		{name: "5 consecutive failures open", steps: repeat(5, errRefused), want: StateOpen, wantWhy: "opened after 5 consecutive failures"},
		{name: "4 failures stay closed", steps: repeat(4, errRefused), want: StateClosed},
		{name: "timeout and unavailable are failures", steps: seq(repeat(2, errSlow), repeat(3, errDown)), want: StateOpen, wantWhy: "after 5 consecutive failures"},
		{name: "success resets the count", steps: seq(repeat(4, errRefused), []step{{}}, repeat(4, errRefused)), want: StateClosed},
		{name: "validation is an answer and resets the count", steps: seq(repeat(4, errRefused), repeat(1, errBadInput), repeat(4, errRefused)), want: StateClosed},
		{name: "rate_limited is an answer", steps: seq(repeat(4, errRefused), repeat(1, errLimited), repeat(4, errRefused)), want: StateClosed},
		{name: "unclassified is an answer", steps: seq(repeat(4, errRefused), repeat(1, errors.New("boom")), repeat(4, errRefused)), want: StateClosed},
		{name: "toolgate's own failure gives no verdict", steps: seq(repeat(4, errRefused), repeat(3, Wrap(RateLimited, "", NotBackend(errors.New("pool full")))), repeat(1, errRefused)), want: StateOpen, wantWhy: "after 5 consecutive failures"},
		{name: "cancelled gives no verdict", steps: seq(repeat(4, errRefused), repeat(3, errCancelled), repeat(1, errRefused)), want: StateOpen, wantWhy: "after 5 consecutive failures"},
		{name: "custom failures", cfg: BreakerConfig{Failures: 2}, steps: repeat(2, errDown), want: StateOpen, wantWhy: "after 2 consecutive failures"},
		{name: "one failure", cfg: BreakerConfig{Failures: 1}, steps: repeat(1, errDown), want: StateOpen, wantWhy: "after 1 consecutive failure "},
		{name: "ratio opens at min calls", cfg: ratioCfg, steps: alternate(5, nil, errRefused), want: StateOpen,
			wantWhy: "opened after 5 of 10 calls failed in the last 10s"},
		{name: "ratio below min calls stays closed", cfg: ratioCfg, steps: seq(alternate(4, errRefused, nil), repeat(1, errRefused)), want: StateClosed},
		{name: "ratio under threshold stays closed", cfg: ratioCfg, steps: seq(alternate(3, errRefused, nil), repeat(6, nil), repeat(1, errRefused)), want: StateClosed},
		{name: "ratio checked on failures only", cfg: ratioCfg, steps: seq(alternate(4, errRefused, nil), repeat(1, errRefused), repeat(1, nil)), want: StateClosed},
		{name: "negative ratio is off", cfg: BreakerConfig{Failures: 100, MinCalls: 10, FailureRatio: -1}, steps: alternate(20, errRefused, nil), want: StateClosed},
		{name: "cancelled calls do not count for the ratio", cfg: ratioCfg, steps: seq(alternate(4, errRefused, errCancelled), repeat(1, errRefused)), want: StateClosed},
		{name: "old failures leave the window", cfg: ratioCfg, steps: seq(
			repeat(5, errRefused),
			[]step{{advance: 10 * time.Second}},   // a success, 10s later
			repeat(4, nil), repeat(1, errRefused), // 6 of 11 failed, had the first 5 stayed
		), want: StateClosed},
		{name: "failures inside the window open", cfg: ratioCfg, steps: seq(
			repeat(4, errRefused),
			[]step{{advance: 8 * time.Second}}, // a success, 8s later
			repeat(4, nil), repeat(1, errRefused),
		), want: StateOpen, wantWhy: "after 5 of 10 calls failed in the last 10s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := retrytest.NewClock()
			b := NewBreaker("b", tc.cfg, clock.Now, nil)
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				p, err := b.Allow()
				if err != nil {
					t.Fatalf("step %d: Allow() = %v, want admission", i, err)
				}
				p.Record(s.err)
			}
			if got := b.State(); got != tc.want {
				t.Fatalf("State() = %v, want %v", got, tc.want)
			}
			_, err := b.Allow()
			if tc.want == StateClosed {
				if err != nil {
					t.Errorf("Allow() on a closed breaker = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantWhy) {
				t.Errorf("Allow() = %v, want a refusal saying %q", err, tc.wantWhy)
			}
		})
	}
}

func TestBreakerRefusal(t *testing.T) {
	clock := retrytest.NewClock()
	b := NewBreaker("rest:api.example.com", BreakerConfig{}, clock.Now, nil)
	for range 5 {
		p, _ := b.Allow()
		p.Record(errRefused)
	}
	clock.Advance(17500 * time.Millisecond)
	_, err := b.Allow()
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("Allow() = %v (%T), want *Error", err, err)
	}
	want := `backend "rest:api.example.com" is unavailable: its circuit breaker opened after 5 consecutive failures ` +
		`(last failure: network error: connection refused); next probe in 13s`
	if e.Error() != want {
		t.Errorf("Allow() error\n got %q\nwant %q", e.Error(), want)
	}
	if e.Class != Unavailable || !errors.Is(err, ErrBreakerOpen) {
		t.Errorf("Allow() error class %q, Is(ErrBreakerOpen) %v; want unavailable, true", e.Class, errors.Is(err, ErrBreakerOpen))
	}
	if e.RetryAfter != 12500*time.Millisecond {
		t.Errorf("RetryAfter = %v, want 12.5s", e.RetryAfter)
	}
}

// TestBreakerRefusalSummarizesLastFailure checks that a refusal, which
// every caller sees, names the last failure by status and class only:
// nothing of the failed request (URL, query, arguments) gets through.
func TestBreakerRefusalSummarizesLastFailure(t *testing.T) {
	const (
		rawURL = "https://api.example.com/users/alice-private?token=s3cret"
		what   = "GET https://api.example.com/users/alice-private?token=s3cret"
	)
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: rawURL, Err: err} }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"status", &Error{Class: Unavailable, Msg: what + " returned 503 Service Unavailable: no user alice-private", Status: 503}, "503 Service Unavailable"},
		{"status under an annotation", Annotate(&Error{Class: Timeout, Msg: what + " returned 504", Status: 504}, "not retried: alice-private"), "504 Gateway Timeout"},
		{"unknown status", &Error{Class: Unavailable, Msg: what + " returned 599", Status: 599}, "HTTP status 599"},
		{"connection refused", &Error{Class: Network, Msg: what + " failed", Err: urlErr(refusedDial)}, "network error: connection refused"},
		{"unclassified dial error", urlErr(refusedDial), "network error: connection refused"},
		{"no such host", &Error{Class: Network, Msg: what + " failed", Err: urlErr(&net.DNSError{Err: "no such host", Name: "alice-private.example.com", IsNotFound: true})},
			"network error: no such host"},
		{"other DNS failure", urlErr(&net.DNSError{Err: "server misbehaving alice-private", Name: "alice-private.example.com"}), "network error: DNS lookup failed"},
		{"response cut short", &Error{Class: Network, Msg: what + " failed", Err: urlErr(io.ErrUnexpectedEOF)}, "network error: unexpected EOF"},
		{"connection closed", urlErr(io.EOF), "network error: connection closed"},
		{"network, cause unknown", Errorf(Network, "%s failed: alice-private", what), "network error"},
		{"timeout", Errorf(Timeout, "%s got no answer in 5s", what), "timeout"},
		{"unavailable", Errorf(Unavailable, "upstream: alice-private is locked"), "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBreaker("rest:api.example.com", BreakerConfig{Failures: 1}, retrytest.NewClock().Now, nil)
			p, _ := b.Allow()
			p.Record(tc.err)
			_, err := b.Allow()
			if err == nil {
				t.Fatalf("Allow() after the failure %v admitted the attempt, want a refusal", tc.err)
			}
			if want := "(last failure: " + tc.want + ")"; !strings.Contains(err.Error(), want) {
				t.Errorf("Allow() = %q, want it to say %q", err, want)
			}
			for _, leak := range []string{"alice", "s3cret", "/users", "10.0.0.1"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("Allow() = %q: it quotes %q from the failed request", err, leak)
				}
			}
		})
	}
}

func TestBreakerHalfOpen(t *testing.T) {
	tests := []struct {
		name       string
		probe      error
		want       State
		wantStates []State
	}{
		{"probe success closes", nil, StateClosed, []State{StateOpen, StateHalfOpen, StateClosed}},
		{"probe answer closes", errBadInput, StateClosed, []State{StateOpen, StateHalfOpen, StateClosed}},
		{"probe failure reopens", errDown, StateOpen, []State{StateOpen, StateHalfOpen, StateOpen}},
		{"cancelled probe frees the slot", errCancelled, StateHalfOpen, []State{StateOpen, StateHalfOpen}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := retrytest.NewClock()
			var states []State
			b := NewBreaker("b", BreakerConfig{Failures: 2, OpenFor: 10 * time.Second}, clock.Now, func(s State) {
				states = append(states, s)
			})
			for range 2 {
				p, _ := b.Allow()
				p.Record(errRefused)
			}
			clock.Advance(10*time.Second - time.Nanosecond)
			if _, err := b.Allow(); err == nil {
				t.Fatal("Allow() before OpenFor passed admitted the attempt")
			}
			clock.Advance(time.Nanosecond)
			probe, err := b.Allow()
			if err != nil || !probe.Probe() {
				t.Fatalf("Allow() after OpenFor = %+v, %v; want the probe", probe, err)
			}
			if got := b.State(); got != StateHalfOpen {
				t.Errorf("State() with a probe in flight = %v, want half_open", got)
			}
			_, err = b.Allow()
			if err == nil || !strings.Contains(err.Error(), "a probe call to test it is in flight") {
				t.Errorf("Allow() with a probe in flight = %v, want a refusal naming the probe", err)
			}
			probe.Record(tc.probe)
			if got := b.State(); got != tc.want {
				t.Errorf("State() after the probe = %v, want %v", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantStates, states); diff != "" {
				t.Errorf("OnState calls mismatch (-want +got):\n%s", diff)
			}
			next, err := b.Allow()
			switch tc.want {
			case StateClosed:
				if err != nil || next.Probe() {
					t.Errorf("Allow() after closing = %+v, %v; want a plain admission", next, err)
				}
			case StateOpen:
				want := `backend "b" is unavailable: its circuit breaker opened again after a probe call failed (last failure: 503 Service Unavailable); next probe in 10s`
				if err == nil || err.Error() != want {
					t.Errorf("Allow() after a failed probe = %v, want %q", err, want)
				}
			case StateHalfOpen:
				if err != nil || !next.Probe() {
					t.Errorf("Allow() after a cancelled probe = %+v, %v; want the next probe", next, err)
				}
			}
		})
	}
}

func TestBreakerClosingResetsCounts(t *testing.T) {
	clock := retrytest.NewClock()
	b := NewBreaker("b", BreakerConfig{Failures: 3, MinCalls: 4, OpenFor: time.Second}, clock.Now, nil)
	for range 3 {
		p, _ := b.Allow()
		p.Record(errRefused)
	}
	clock.Advance(time.Second)
	p, _ := b.Allow()
	p.Record(nil)
	// Without the reset, the 3 failures before it opened would still be
	// in the window, and 5 of 5 calls failed would open it by ratio.
	for range 2 {
		p, _ := b.Allow()
		p.Record(errRefused)
	}
	if got := b.State(); got != StateClosed {
		t.Errorf("State() = %v after 2 failures following a close, want closed", got)
	}
}

func TestBreakerProbeConcurrency(t *testing.T) {
	const callers = 64
	for _, rounds := range []int{1, 2, 3} {
		clock := retrytest.NewClock()
		b := NewBreaker("b", BreakerConfig{Failures: 1, OpenFor: time.Second}, clock.Now, nil)
		p, _ := b.Allow()
		p.Record(errRefused)
		for round := range rounds {
			clock.Advance(time.Second)
			var admitted, probes atomic.Int32
			permits := make([]Permit, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					<-start
					p, err := b.Allow()
					if err == nil {
						admitted.Add(1)
						permits[i] = p
						if p.Probe() {
							probes.Add(1)
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if admitted.Load() != 1 || probes.Load() != 1 {
				t.Fatalf("round %d: %d of %d concurrent callers admitted (%d probes), want exactly 1 probe", round, admitted.Load(), callers, probes.Load())
			}
			for _, p := range permits {
				p.Record(errRefused) // reopen for the next round
			}
		}
	}
}

func TestBreakerIgnoresStaleOutcomes(t *testing.T) {
	clock := retrytest.NewClock()
	b := NewBreaker("b", BreakerConfig{Failures: 1, OpenFor: time.Second}, clock.Now, nil)
	early, _ := b.Allow() // admitted while closed, answers late
	late, _ := b.Allow()
	latest, _ := b.Allow()
	p, _ := b.Allow()
	p.Record(errRefused) // opens
	early.Record(nil)
	if got := b.State(); got != StateOpen {
		t.Fatalf("a success admitted before the breaker opened closed it: State() = %v", got)
	}
	clock.Advance(time.Second)
	probe, err := b.Allow()
	if err != nil || !probe.Probe() {
		t.Fatalf("Allow() = %v, want the probe", err)
	}
	late.Record(errRefused)
	if got := b.State(); got != StateHalfOpen {
		t.Fatalf("a failure admitted before the breaker opened decided the probe: State() = %v", got)
	}
	probe.Record(nil)
	if got := b.State(); got != StateClosed {
		t.Fatalf("State() after the probe succeeded = %v, want closed", got)
	}
	latest.Record(errRefused)
	if got := b.State(); got != StateClosed {
		t.Errorf("a failure admitted before the breaker opened reopened it after it closed: State() = %v", got)
	}
}

func TestPermitRecordsOnce(t *testing.T) {
	tests := []struct {
		name   string
		record func(p *Permit)
		want   State
	}{
		{"the first outcome wins", func(p *Permit) { p.Record(nil); p.Record(errRefused) }, StateClosed},
		{"a release wins over a later failure", func(p *Permit) { p.Release(); p.Record(errRefused) }, StateClosed},
		{"a release after a failure does nothing", func(p *Permit) { p.Record(errRefused); p.Release() }, StateOpen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBreaker("b", BreakerConfig{Failures: 1}, retrytest.NewClock().Now, nil)
			p, err := b.Allow()
			if err != nil {
				t.Fatalf("Allow() = %v, want admission", err)
			}
			tc.record(&p)
			if got := b.State(); got != tc.want {
				t.Errorf("State() = %v, want %v", got, tc.want)
			}
		})
	}
}

// A probe that ends without a verdict on the backend — released (a panic,
// an abandoned retry) or failed with toolgate's own error (NotBackend) —
// leaves the breaker half-open and frees the probe slot for the next call.
func TestProbeWithoutVerdict(t *testing.T) {
	for name, end := range map[string]func(*Permit){
		"released":    func(p *Permit) { p.Release() },
		"not backend": func(p *Permit) { p.Record(Wrap(RateLimited, "", NotBackend(errors.New("thread pool full")))) },
	} {
		t.Run(name, func(t *testing.T) {
			clock := retrytest.NewClock()
			b := NewBreaker("b", BreakerConfig{Failures: 1, OpenFor: time.Second}, clock.Now, nil)
			p, _ := b.Allow()
			p.Record(errRefused)
			clock.Advance(time.Second)
			probe, err := b.Allow()
			if err != nil || !probe.Probe() {
				t.Fatalf("Allow() after OpenFor = %v, want the probe", err)
			}
			end(&probe)
			if got := b.State(); got != StateHalfOpen {
				t.Errorf("State() after the probe ended without a verdict = %v, want half-open", got)
			}
			next, err := b.Allow()
			if err != nil || !next.Probe() {
				t.Fatalf("Allow() after the probe ended without a verdict = %v, want the next probe", err)
			}
			next.Record(nil)
			if got := b.State(); got != StateClosed {
				t.Errorf("State() after the next probe succeeded = %v, want closed", got)
			}
		})
	}
}

func TestBreakerDisabledAndNil(t *testing.T) {
	for name, b := range map[string]*Breaker{
		"nil":      nil,
		"disabled": NewBreaker("b", BreakerConfig{Disabled: true, Failures: 1}, nil, nil),
	} {
		t.Run(name, func(t *testing.T) {
			for range 10 {
				p, err := b.Allow()
				if err != nil {
					t.Fatalf("Allow() = %v, want admission", err)
				}
				p.Record(errRefused)
			}
			if got := b.State(); got != StateClosed {
				t.Errorf("State() = %v, want closed", got)
			}
		})
	}
}

func TestBreakerConfigDefaults(t *testing.T) {
	got := NewBreaker("b", BreakerConfig{}, nil, nil).Config()
	want := BreakerConfig{Failures: 5, FailureRatio: 0.5, MinCalls: 20, Window: 30 * time.Second, OpenFor: 30 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Config() mismatch (-want +got):\n%s", diff)
	}
}

func TestStateString(t *testing.T) {
	tests := []struct {
		s     State
		want  string
		gauge float64
	}{
		{StateClosed, "closed", 0},
		{StateOpen, "open", 1},
		{StateHalfOpen, "half_open", 2},
		{State(7), "State(7)", 7},
	}
	for _, tc := range tests {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("State(%d).String() = %q, want %q", int(tc.s), got, tc.want)
		}
		if float64(tc.s) != tc.gauge {
			t.Errorf("float64(%v) = %v, want %v", tc.s, float64(tc.s), tc.gauge)
		}
	}
}

func TestFmtDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{500 * time.Microsecond, "500µs"},
		{1234567 * time.Microsecond, "1.23s"},
		{150*time.Millisecond + 400*time.Microsecond, "150ms"},
		{2 * time.Second, "2s"},
		{time.Minute, "1m"},
		{90 * time.Second, "1m30s"},
		{2 * time.Hour, "2h"},
	}
	for _, tc := range tests {
		if got := fmtDuration(tc.in); got != tc.want {
			t.Errorf("fmtDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := fmtSecondsUp(100 * time.Millisecond); got != "1s" {
		t.Errorf("fmtSecondsUp(100ms) = %q, want 1s", got)
	}
	if got := fmtSecondsUp(59001 * time.Millisecond); got != "1m" {
		t.Errorf("fmtSecondsUp(59.001s) = %q, want 1m", got)
	}
}

func TestBreakerReset(t *testing.T) {
	var states []State
	b := NewBreaker("upstream:x", BreakerConfig{Failures: 2, OpenFor: time.Hour}, nil, func(s State) { states = append(states, s) })
	fail := Errorf(Unavailable, "down")
	for range 2 {
		p, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow while closed: %v", err)
		}
		p.Record(fail)
	}
	if _, err := b.Allow(); err == nil || b.State() != StateOpen {
		t.Fatalf("after 2 failures: state %v, Allow error %v; want open and refused", b.State(), err)
	}
	b.Reset()
	if b.State() != StateClosed {
		t.Fatalf("state after Reset = %v, want closed", b.State())
	}
	p, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow after Reset: %v", err)
	}
	// The counts are gone: one more failure does not reopen it.
	p.Record(fail)
	if b.State() != StateClosed {
		t.Errorf("one failure after Reset opened the breaker")
	}
	if want := []State{StateOpen, StateClosed}; !slices.Equal(states, want) {
		t.Errorf("transitions %v, want %v", states, want)
	}
	var nilBreaker *Breaker
	nilBreaker.Reset() // must not panic
}
