package retry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/retry/retrytest"
)

// failN returns an fn for Run that fails with failures[attempt-1] for the
// first attempts and then succeeds; calls counts its calls.
func failN(t *testing.T, calls *int, failures ...error) func(context.Context, int) error {
	return func(_ context.Context, attempt int) error {
		*calls++
		if attempt != *calls {
			t.Errorf("attempt = %d on call %d", attempt, *calls)
		}
		if attempt <= len(failures) {
			return failures[attempt-1]
		}
		return nil
	}
}

func TestRun(t *testing.T) {
	unavailable := Errorf(Unavailable, "try later")
	bad := Errorf(Validation, "bad")
	boom := errors.New("boom")
	failing := Errorf(Execution, "exit status 1")
	policy := Policy{Attempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Second}
	tests := []struct {
		name         string
		plan         Plan
		failures     []error
		wantAttempts int
		wantClass    Class  // "" for success
		wantMsg      string // the final error's text, when not ""
		wantSame     error  // the final error must be this very error
	}{
		{name: "success first", plan: Plan{Policy: policy, Idempotent: true}, wantAttempts: 1},
		{name: "retries then success", plan: Plan{Policy: policy, Idempotent: true},
			failures: []error{unavailable, Errorf(Network, "reset")}, wantAttempts: 3},
		{name: "gives up after attempts", plan: Plan{Policy: policy, Idempotent: true},
			failures: []error{unavailable, unavailable, unavailable, unavailable}, wantAttempts: 3, wantClass: Unavailable,
			wantMsg: "try later; gave up after 3 attempts"},
		{name: "one attempt allowed", plan: Plan{Policy: Policy{Attempts: 1}, Idempotent: true, Subject: `tool "w"`},
			failures: []error{unavailable}, wantAttempts: 1, wantClass: Unavailable,
			wantMsg: `try later; not retried: the retry policy of tool "w" allows only 1 attempt`},
		{name: "not idempotent", plan: Plan{Policy: policy, Subject: `tool "x"`},
			failures: []error{unavailable}, wantAttempts: 1, wantClass: Unavailable,
			wantMsg: `try later; not retried: tool "x" is not idempotent (mark it idempotent: true if repeating it is safe)`},
		{name: "not idempotent, a tool named", plan: Plan{Policy: policy, Tool: "y"},
			failures: []error{unavailable}, wantAttempts: 1, wantClass: Unavailable,
			wantMsg: `try later; not retried: tool "y" is not idempotent (mark it idempotent: true if repeating it is safe)`},
		{name: "the subject over the tool", plan: Plan{Policy: Policy{Attempts: 1}, Idempotent: true, Subject: "the model call", Tool: "y"},
			failures: []error{unavailable}, wantAttempts: 1, wantClass: Unavailable,
			wantMsg: `try later; not retried: the retry policy of the model call allows only 1 attempt`},
		{name: "not idempotent, no subject", plan: Plan{Policy: policy},
			failures: []error{unavailable}, wantAttempts: 1, wantClass: Unavailable,
			wantMsg: `try later; not retried: the call is not idempotent (mark it idempotent: true if repeating it is safe)`},
		{name: "class not in On is unchanged", plan: Plan{Policy: policy, Idempotent: true},
			failures: []error{bad}, wantAttempts: 1, wantClass: Validation, wantSame: bad},
		{name: "not idempotent and not in On is unchanged", plan: Plan{Policy: policy},
			failures: []error{bad}, wantAttempts: 1, wantClass: Validation, wantSame: bad},
		{name: "unclassified is internal, unchanged", plan: Plan{Policy: policy, Idempotent: true},
			failures: []error{boom}, wantAttempts: 1, wantClass: Internal, wantSame: boom},
		{name: "execution retried when in On", plan: Plan{Policy: Policy{Attempts: 3, On: []Class{Execution}}, Idempotent: true},
			failures: []error{failing, failing}, wantAttempts: 3},
		{name: "transient not retried when not in On", plan: Plan{Policy: Policy{Attempts: 3, On: []Class{Execution}}, Idempotent: true},
			failures: []error{unavailable}, wantAttempts: 1, wantClass: Unavailable, wantSame: unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				calls := 0
				n, err := Run(t.Context(), tc.plan, failN(t, &calls, tc.failures...))
				if n != tc.wantAttempts || calls != tc.wantAttempts {
					t.Errorf("Run attempts = %d (fn called %d times), want %d", n, calls, tc.wantAttempts)
				}
				if got := Classify(err); got != tc.wantClass {
					t.Errorf("Run error = %v (class %q), want class %q", err, got, tc.wantClass)
				}
				if tc.wantMsg != "" && (err == nil || err.Error() != tc.wantMsg) {
					t.Errorf("Run error = %v, want %q", err, tc.wantMsg)
				}
				if tc.wantSame != nil && err != tc.wantSame {
					t.Errorf("Run error = %#v, want the failure itself, unchanged", err)
				}
				if elapsed := time.Since(start); elapsed > time.Duration(n-1)*time.Second {
					t.Errorf("Run took %v for %d attempts, want at most %v", elapsed, n, time.Duration(n-1)*time.Second)
				}
			})
		})
	}
}

func TestRunBudgetExhausted(t *testing.T) {
	tests := []struct {
		name   string
		budget BudgetConfig
		want   string
	}{
		{"ratio", BudgetConfig{MinRetries: -1},
			`down; not retried: the retry budget of backend "rest:api.example.com" is spent (retries may add at most 20% to its calls)`},
		{"floor only", BudgetConfig{Ratio: -1, MinRetries: 1},
			`down; not retried: the retry budget of backend "rest:api.example.com" is spent (it allows 1 retry per 10s)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var exhausted []string
				bs := NewBackends(BackendsConfig{
					Breaker:           BreakerConfig{Disabled: true},
					Budget:            tc.budget,
					OnBudgetExhausted: func(b string) { exhausted = append(exhausted, b) },
				})
				plan := Plan{Policy: Policy{Attempts: 5}, Idempotent: true, Backend: bs.Get("rest:api.example.com")}
				down := &Error{Class: Unavailable, Msg: "down", RetryAfter: time.Second}
				calls := 0
				// One call earns 0.2 retries (ratio) or the floor grants 1:
				// either way the first retry is granted and the second not.
				n, err := Run(t.Context(), plan, failN(t, &calls, down, down, down, down, down))
				if n != 2 {
					t.Errorf("Run attempts = %d, want 2", n)
				}
				if err == nil || err.Error() != tc.want {
					t.Errorf("Run error = %v, want %q", err, tc.want)
				}
				if Classify(err) != Unavailable || RetryAfterOf(err) != time.Second || !errors.Is(err, down) {
					t.Errorf("Run error class %q, RetryAfter %v, Is(down) %v; want unavailable, 1s, true", Classify(err), RetryAfterOf(err), errors.Is(err, down))
				}
				if len(exhausted) != 1 || exhausted[0] != "rest:api.example.com" {
					t.Errorf("OnBudgetExhausted calls = %q, want one for the backend", exhausted)
				}
			})
		})
	}
}

func TestRunStopsBeforeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		last := &Error{Class: RateLimited, Msg: "slow down", RetryAfter: 4 * time.Second}
		bs := NewBackends(BackendsConfig{Budget: BudgetConfig{Ratio: -1, MinRetries: 1}})
		plan := Plan{Policy: Policy{Attempts: 5, MaxBackoff: time.Minute}, Idempotent: true, Backend: bs.Get("b")}
		n, err := Run(ctx, plan, func(context.Context, int) error { return last })
		want := "slow down; not retried: waiting 4s would pass the call's deadline (3s left)"
		if n != 1 || err == nil || err.Error() != want {
			t.Errorf("Run = %d, %v, want 1, %q", n, err, want)
		}
		if RetryAfterOf(err) != 4*time.Second || Classify(err) != RateLimited {
			t.Errorf("Run error lost its class or RetryAfter: %q, %v", Classify(err), RetryAfterOf(err))
		}
		if elapsed := time.Since(start); elapsed != 0 {
			t.Errorf("Run waited %v, want no wait: the retry would start after the deadline", elapsed)
		}
		// The budget was asked last: the retry that did not happen did not
		// spend the one retry it has.
		if !bs.Get("b").TryRetry() {
			t.Error("the budget was spent on a retry that was not made")
		}
	})
}

func TestRunCancelStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		time.AfterFunc(time.Second, cancel) // fake time: during the first wait
		n, err := Run(ctx, Plan{Policy: Policy{Attempts: 5, InitialBackoff: time.Hour, MaxBackoff: time.Hour}, Idempotent: true},
			func(context.Context, int) error {
				return &Error{Class: Unavailable, Msg: "down", RetryAfter: time.Hour}
			})
		if n != 1 {
			t.Errorf("Run attempts = %d, want 1", n)
		}
		if Classify(err) != Cancelled || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "(last failure: down)") {
			t.Errorf("Run error = %v (class %q), want cancelled, quoting the last failure", err, Classify(err))
		}
		if elapsed := time.Since(start); elapsed != time.Second {
			t.Errorf("Run returned after %v, want %v (at the cancellation)", elapsed, time.Second)
		}
	})
}

func TestRunHonoursRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter time.Duration
		maxBackoff time.Duration
		want       []time.Duration // when each attempt starts
	}{
		{"honoured", 4 * time.Second, 10 * time.Second, []time.Duration{0, 4 * time.Second, 8 * time.Second}},
		{"capped at MaxBackoff", time.Hour, 2 * time.Second, []time.Duration{0, 2 * time.Second, 4 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var at []time.Duration
				start := time.Now()
				plan := Plan{Policy: Policy{Attempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: tc.maxBackoff}, Idempotent: true}
				n, err := Run(t.Context(), plan, func(context.Context, int) error {
					at = append(at, time.Since(start))
					if len(at) < 3 {
						return &Error{Class: RateLimited, Msg: "slow down", RetryAfter: tc.retryAfter}
					}
					return nil
				})
				if err != nil || n != 3 {
					t.Fatalf("Run = %d, %v, want 3, nil", n, err)
				}
				for i := range tc.want {
					if at[i] != tc.want[i] {
						t.Errorf("attempt %d at %v, want %v", i+1, at[i], tc.want[i])
					}
				}
			})
		})
	}
}

func TestRunBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var states []string
		bs := NewBackends(BackendsConfig{
			Breaker: BreakerConfig{Failures: 2, OpenFor: 30 * time.Second},
			OnState: func(b string, s State) { states = append(states, b+" "+s.String()) },
		})
		plan := Plan{Policy: Policy{Attempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Second}, Idempotent: true, Backend: bs.Get("up:git")}
		refused := Errorf(Network, "connection refused")
		calls := 0
		n, err := Run(t.Context(), plan, func(context.Context, int) error { calls++; return refused })
		want := `connection refused; not retried: backend "up:git" is unavailable: its circuit breaker opened after 2 consecutive failures; next probe in 30s`
		if n != 2 || calls != 2 || err == nil || err.Error() != want {
			t.Errorf("Run = %d (%d calls), %v; want 2, %q", n, calls, err, want)
		}
		// The next call is refused before it reaches the backend.
		n, err = Run(t.Context(), plan, func(context.Context, int) error { calls++; return nil })
		if n != 0 || calls != 2 || !errors.Is(err, ErrBreakerOpen) || Classify(err) != Unavailable {
			t.Errorf("Run on an open breaker = %d (%d calls), %v; want 0, a refusal", n, calls, err)
		}
		time.Sleep(30 * time.Second) // fake time: OpenFor passes
		n, err = Run(t.Context(), plan, func(context.Context, int) error { calls++; return nil })
		if n != 1 || err != nil {
			t.Errorf("Run after OpenFor = %d, %v; want the probe to succeed", n, err)
		}
		if got := bs.States()["up:git"]; got != StateClosed {
			t.Errorf("States()[up:git] = %v, want closed", got)
		}
		if want := "up:git open,up:git half_open,up:git closed"; strings.Join(states, ",") != want {
			t.Errorf("OnState calls = %q, want %q", states, want)
		}
	})
}

func TestRunBreakerRefusesRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := NewBackends(BackendsConfig{Breaker: BreakerConfig{Failures: 1, OpenFor: time.Second}})
		b := bs.Get("b")
		// The breaker opens on the first failure for 1s; the retry waits
		// 2s, by when a probe is due. But another call takes the probe
		// at 1.5s and is still in flight when the retry asks.
		probes := make(chan Permit, 1)
		time.AfterFunc(1500*time.Millisecond, func() {
			p, err := b.Breaker().Allow()
			if err != nil || !p.Probe() {
				t.Errorf("the other call's Allow() = %v, want the probe", err)
			}
			probes <- p
		})
		down := &Error{Class: Unavailable, Msg: "down", RetryAfter: 2 * time.Second}
		plan := Plan{Policy: Policy{Attempts: 3, MaxBackoff: time.Minute}, Idempotent: true, Backend: b}
		n, err := Run(t.Context(), plan, func(context.Context, int) error { return down })
		if n != 1 {
			t.Errorf("Run attempts = %d, want 1", n)
		}
		if err == nil || !strings.HasPrefix(err.Error(), `down; not retried: backend "b" is unavailable: its circuit breaker opened after 1 consecutive failure`) ||
			!strings.Contains(err.Error(), "a probe call to test it is in flight") {
			t.Errorf("Run error = %v, want the last failure, annotated with the refusal", err)
		}
		if !errors.Is(err, down) || RetryAfterOf(err) != 2*time.Second {
			t.Errorf("Run error = %v, want the last failure kept, RetryAfter 2s", err)
		}
		probe := <-probes
		probe.Record(nil)
	})
}

// TestRunPanicReleasesProbe checks that a probe whose attempt panics does
// not hold its breaker half-open: the next call probes.
func TestRunPanicReleasesProbe(t *testing.T) {
	clock := retrytest.NewClock()
	b := NewBackends(BackendsConfig{Breaker: BreakerConfig{Failures: 1, OpenFor: time.Second}, Now: clock.Now}).Get("b")
	p, _ := b.Admit(1)
	p.Record(Errorf(Unavailable, "down"))
	clock.Advance(time.Second)
	plan := Plan{Policy: Policy{Attempts: 3}, Idempotent: true, Backend: b}

	func() {
		defer func() {
			if r := recover(); r != "tool bug" {
				t.Errorf("recover() = %v, want the attempt's panic passed on", r)
			}
		}()
		Run(t.Context(), plan, func(context.Context, int) error { panic("tool bug") })
	}()
	if got := b.State(); got != StateHalfOpen {
		t.Fatalf("State() after the probe panicked = %v, want half_open", got)
	}
	n, err := Run(t.Context(), plan, func(context.Context, int) error { return nil })
	if n != 1 || err != nil {
		t.Fatalf("Run after the panic = %d, %v; want the next probe admitted and successful", n, err)
	}
	if got := b.State(); got != StateClosed {
		t.Errorf("State() after the next probe = %v, want closed", got)
	}
}

func TestDecide(t *testing.T) {
	down := Errorf(Unavailable, "down")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	half := func() float64 { return 0.5 }
	policy := Policy{Attempts: 3, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second}
	tests := []struct {
		name       string
		ctx        context.Context
		plan       Plan
		attempt    int
		err        error
		wantWait   time.Duration
		wantOK     bool
		wantReason string
	}{
		{name: "nil error", plan: Plan{Policy: policy, Idempotent: true}, attempt: 1},
		{name: "retry with jitter", plan: Plan{Policy: policy, Idempotent: true, Rand: half}, attempt: 2, err: down,
			wantWait: time.Second, wantOK: true},
		{name: "cancelled", ctx: cancelled, plan: Plan{Policy: policy, Idempotent: true}, attempt: 1, err: down,
			wantReason: "not retried: the call was cancelled"},
		{name: "deadline passed", ctx: expired, plan: Plan{Policy: policy, Idempotent: true}, attempt: 1, err: down,
			wantReason: "not retried: the call's deadline has passed"},
		{name: "cancelled class is not retried", plan: Plan{Policy: policy, Idempotent: true}, attempt: 1, err: context.Canceled},
		{name: "permanent failure is not retried", plan: Plan{Policy: policy, Idempotent: true}, attempt: 1, err: Permanent(down)},
		{name: "permanent failure of a class in On", plan: Plan{Policy: Policy{On: []Class{Execution}}, Idempotent: true}, attempt: 1,
			err: Permanent(Errorf(Execution, "no"))},
		{name: "last attempt", plan: Plan{Policy: policy, Idempotent: true}, attempt: 3, err: down,
			wantReason: "gave up after 3 attempts"},
		{name: "default attempts", plan: Plan{Idempotent: true, Rand: half}, attempt: 2, err: down,
			wantWait: 100 * time.Millisecond, wantOK: true},
		{name: "nil backend grants", plan: Plan{Policy: policy, Idempotent: true, Backend: nil, Rand: half}, attempt: 1, err: down,
			wantWait: 500 * time.Millisecond, wantOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			wait, ok, reason := tc.plan.Decide(ctx, tc.attempt, tc.err)
			if wait != tc.wantWait || ok != tc.wantOK || reason != tc.wantReason {
				t.Errorf("Decide(%d, %v) = %v, %v, %q; want %v, %v, %q", tc.attempt, tc.err, wait, ok, reason, tc.wantWait, tc.wantOK, tc.wantReason)
			}
		})
	}
}

func TestAnnotate(t *testing.T) {
	cause := errors.New("connection reset")
	limited := &Error{Class: RateLimited, Op: "GET /x", Msg: "429", RetryAfter: 3 * time.Second, Status: 429, Err: cause}
	tests := []struct {
		name       string
		err        error
		reason     string
		wantMsg    string
		wantClass  Class
		wantAfter  time.Duration
		wantStatus int
	}{
		{"keeps class, retry-after and status", limited, "gave up after 2 attempts", "GET /x: 429; gave up after 2 attempts", RateLimited, 3 * time.Second, 429},
		{"classifies a plain error", &net503{}, "not retried: x", "503; not retried: x", Network, 0, 0},
		{"empty reason", limited, "", "GET /x: 429", RateLimited, 3 * time.Second, 429},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Annotate(tc.err, tc.reason)
			if got.Error() != tc.wantMsg || Classify(got) != tc.wantClass || RetryAfterOf(got) != tc.wantAfter {
				t.Errorf("Annotate = %q (%q, %v), want %q (%q, %v)", got, Classify(got), RetryAfterOf(got), tc.wantMsg, tc.wantClass, tc.wantAfter)
			}
			if e, _ := errors.AsType[*Error](got); e == nil || e.Status != tc.wantStatus {
				t.Errorf("Annotate = %#v, want Status %d", e, tc.wantStatus)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("Annotate(%v) does not wrap the error", tc.err)
			}
		})
	}
	if Annotate(nil, "x") != nil {
		t.Error("Annotate(nil) != nil")
	}
	if got := Annotate(limited, ""); got != limited {
		t.Errorf("Annotate(err, \"\") = %#v, want err itself", got)
	}
}

// net503 is a net.Error that is not a timeout.
type net503 struct{}

func (*net503) Error() string   { return "503" }
func (*net503) Timeout() bool   { return false }
func (*net503) Temporary() bool { return false }

func TestGaveUp(t *testing.T) {
	p := Plan{Idempotent: true} // the default policy: 3 attempts
	_, _, reason := p.Decide(t.Context(), 3, Errorf(Unavailable, "down"))
	if !GaveUp(reason) {
		t.Errorf("GaveUp(%q) = false for the attempts running out", reason)
	}
	if GaveUp("not retried: the call was cancelled") || GaveUp("") {
		t.Error("GaveUp is true for another reason")
	}
}
