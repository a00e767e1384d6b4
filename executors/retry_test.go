package executors

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"

	"github.com/toolgate/toolgate/retry/retrytest"
)

// flakyTool is a stateless tool that fails its first fails calls with err
// and then succeeds; it counts its invocations.
type flakyTool struct {
	fails int
	err   error
	calls atomic.Int64
}

func (f *flakyTool) run(context.Context, map[string]any) (Result, error) {
	if n := f.calls.Add(1); n <= int64(f.fails) {
		return Result{}, f.err
	}
	return Text("ok"), nil
}

// retryDispatcher returns a dispatch function that runs fn as the
// stateless tool "t" with plan as every call's Call.Retry, and whose
// retries are appended to *retried.
func retryDispatcher(fn StatelessFunc, plan retry.Plan, retried *[]retry.Class) (dispatch func(context.Context, Call) (Result, error), tool *registry.Tool) {
	var mu sync.Mutex
	d := NewDispatcher(&DispatcherOptions{
		DefaultTimeout: time.Hour,
		OnRetry: func(tool string, c retry.Class) {
			mu.Lock()
			defer mu.Unlock()
			if retried != nil {
				*retried = append(*retried, c)
			}
		},
	})
	dispatch = func(ctx context.Context, call Call) (Result, error) {
		call.Retry = plan
		return d.Dispatch(ctx, fn, call)
	}
	return dispatch, &registry.Tool{Name: "t", Kind: registry.Stateless}
}

func zeroRand() float64 { return 0 }

func TestDispatchRetries(t *testing.T) {
	unavailable := retry.Errorf(retry.Unavailable, "backend busy")
	backends := func() *retry.Backend {
		return retry.NewBackends(retry.BackendsConfig{}).Get("test:backend")
	}
	tests := []struct {
		name         string
		fails        int
		err          error
		plan         retry.Plan
		wantCalls    int64
		wantRetried  []retry.Class
		wantAttempts any         // Meta[AttemptsMetaKey] on success; nil when absent
		wantClass    retry.Class // of the error; "" for success
		wantMsg      string      // the error's message
	}{
		{
			name:  "first attempt succeeds",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3}, Idempotent: true, Rand: zeroRand},
			fails: 0, err: unavailable, wantCalls: 1,
		},
		{
			name:  "one failure then success",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3}, Idempotent: true, Rand: zeroRand},
			fails: 1, err: unavailable, wantCalls: 2,
			wantRetried: []retry.Class{retry.Unavailable}, wantAttempts: 2,
		},
		{
			name:  "four failures then success, with a backend",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 5}, Idempotent: true, Rand: zeroRand, Backend: backends()},
			fails: 4, err: unavailable, wantCalls: 5,
			wantRetried:  []retry.Class{retry.Unavailable, retry.Unavailable, retry.Unavailable, retry.Unavailable},
			wantAttempts: 5,
		},
		{
			name:  "gives up after the attempts",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3}, Idempotent: true, Rand: zeroRand},
			fails: 5, err: unavailable, wantCalls: 3,
			wantRetried: []retry.Class{retry.Unavailable, retry.Unavailable},
			wantClass:   retry.Unavailable, wantMsg: "backend busy; gave up after 3 attempts",
		},
		{
			name:  "not idempotent",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3}, Rand: zeroRand, Backend: backends(), Subject: `tool "t"`},
			fails: 1, err: unavailable, wantCalls: 1,
			wantClass: retry.Unavailable,
			wantMsg:   `backend busy; not retried: tool "t" is not idempotent (mark it idempotent: true if repeating it is safe)`,
		},
		{
			// Without a backend, a call that cannot be retried takes the
			// dispatcher's fast path: one attempt, and still the reason.
			name:  "not idempotent, no backend",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3}, Rand: zeroRand, Subject: `tool "t"`},
			fails: 1, err: unavailable, wantCalls: 1,
			wantClass: retry.Unavailable,
			wantMsg:   `backend busy; not retried: tool "t" is not idempotent (mark it idempotent: true if repeating it is safe)`,
		},
		{
			name:  "class not in On",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3}, Idempotent: true, Rand: zeroRand, Backend: backends()},
			fails: 1, err: retry.Errorf(retry.Execution, "tool said no"), wantCalls: 1,
			wantClass: retry.Execution, wantMsg: "tool said no",
		},
		{
			name:  "execution retried when On lists it",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3, On: []retry.Class{retry.Execution}}, Idempotent: true, Rand: zeroRand},
			fails: 1, err: retry.Errorf(retry.Execution, "tool said no"), wantCalls: 2,
			wantRetried: []retry.Class{retry.Execution}, wantAttempts: 2,
		},
		{
			name:  "unavailable not retried when On omits it",
			plan:  retry.Plan{Policy: retry.Policy{Attempts: 3, On: []retry.Class{retry.Network}}, Idempotent: true, Rand: zeroRand},
			fails: 1, err: unavailable, wantCalls: 1,
			wantClass: retry.Unavailable, wantMsg: "backend busy",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool := &flakyTool{fails: tc.fails, err: tc.err}
			var retried []retry.Class
			dispatch, def := retryDispatcher(tool.run, tc.plan, &retried)
			var attempts []int
			res, err := dispatch(t.Context(), Call{Tool: def, Thread: "x", OnAttempt: func(n int) { attempts = append(attempts, n) }})
			if got := retry.Classify(err); got != tc.wantClass {
				t.Fatalf("Dispatch error = %v (class %q), want class %q", err, got, tc.wantClass)
			}
			var wantAttempts []int
			for n := range tc.wantCalls {
				wantAttempts = append(wantAttempts, int(n)+1)
			}
			if diff := cmp.Diff(wantAttempts, attempts); diff != "" {
				t.Errorf("OnAttempt numbers (-want +got):\n%s", diff)
			}
			if err != nil && err.Error() != tc.wantMsg {
				t.Errorf("Dispatch error = %q, want %q", err, tc.wantMsg)
			}
			if err != nil && !errors.Is(err, tc.err) {
				t.Errorf("Dispatch error %v does not wrap the tool's error %v", err, tc.err)
			}
			if got := res.Meta[AttemptsMetaKey]; got != tc.wantAttempts {
				t.Errorf("Meta[%q] = %v, want %v", AttemptsMetaKey, got, tc.wantAttempts)
			}
			if got := tool.calls.Load(); got != tc.wantCalls {
				t.Errorf("the tool ran %d times, want %d", got, tc.wantCalls)
			}
			if diff := cmp.Diff(tc.wantRetried, retried); diff != "" {
				t.Errorf("OnRetry classes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDispatchRetryKeepsMeta checks that the attempts count is added to
// the result's own _meta without touching the map the tool returned.
func TestDispatchRetryKeepsMeta(t *testing.T) {
	own := map[string]any{"mine": "x"}
	var calls atomic.Int64
	fn := func(context.Context, map[string]any) (Result, error) {
		if calls.Add(1) == 1 {
			return Result{}, retry.Errorf(retry.Network, "reset")
		}
		return Result{Content: []Content{{Type: TextContent, Text: "ok"}}, Meta: own}, nil
	}
	dispatch, def := retryDispatcher(fn, retry.Plan{Policy: retry.Policy{Attempts: 2}, Idempotent: true, Rand: zeroRand}, nil)
	res, err := dispatch(t.Context(), Call{Tool: def, Thread: "x"})
	if err != nil {
		t.Fatalf("Dispatch = %v", err)
	}
	if diff := cmp.Diff(map[string]any{"mine": "x", AttemptsMetaKey: 2}, res.Meta); diff != "" {
		t.Errorf("Meta (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"mine": "x"}, own); diff != "" {
		t.Errorf("the tool's own Meta map was changed (-want +got):\n%s", diff)
	}
}

func TestDispatchBreaker(t *testing.T) {
	clock := retrytest.NewClock()
	var mu sync.Mutex
	var states []retry.State
	backends := retry.NewBackends(retry.BackendsConfig{
		Breaker: retry.BreakerConfig{Failures: 3, FailureRatio: -1, OpenFor: 10 * time.Second},
		Now:     clock.Now,
		OnState: func(_ string, s retry.State) {
			mu.Lock()
			states = append(states, s)
			mu.Unlock()
		},
	})
	backend := backends.Get("test:api")
	transitions := func() []retry.State {
		mu.Lock()
		defer mu.Unlock()
		return append([]retry.State(nil), states...)
	}

	// The tool fails while failing is set; a call may be held in it by
	// hold, signalling entered when it starts.
	var (
		calls   atomic.Int64
		failing atomic.Bool
		hold    atomic.Pointer[chan struct{}]
		entered = make(chan struct{}, 1)
	)
	failing.Store(true)
	fn := func(ctx context.Context, _ map[string]any) (Result, error) {
		calls.Add(1)
		if h := hold.Load(); h != nil {
			entered <- struct{}{}
			select {
			case <-*h:
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}
		if failing.Load() {
			return Result{}, retry.Errorf(retry.Unavailable, "api down")
		}
		return Text("ok"), nil
	}
	plan := retry.Plan{Policy: retry.Policy{Attempts: 1}, Idempotent: true, Backend: backend, Subject: `tool "t"`}
	dispatch, def := retryDispatcher(fn, plan, nil)
	call := func() error {
		_, err := dispatch(t.Context(), Call{Tool: def, Thread: "x"})
		return err
	}
	// wantRefused checks that a call fails fast without running the tool.
	wantRefused := func(t *testing.T, wantMsg string) {
		t.Helper()
		before := calls.Load()
		err := call()
		if got := retry.Classify(err); got != retry.Unavailable || !errors.Is(err, retry.ErrBreakerOpen) {
			t.Fatalf("Dispatch = %v (class %q), want an unavailable breaker refusal", err, got)
		}
		for _, want := range []string{`backend "test:api" is unavailable`, wantMsg} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
		if n := calls.Load() - before; n != 0 {
			t.Errorf("the tool ran %d times while the breaker was open, want 0", n)
		}
	}

	for i := range 3 {
		if err := call(); retry.Classify(err) != retry.Unavailable || errors.Is(err, retry.ErrBreakerOpen) {
			t.Fatalf("call %d = %v, want the tool's own unavailable failure", i+1, err)
		}
	}
	if calls.Load() != 3 || backend.State() != retry.StateOpen {
		t.Fatalf("after 3 failures: tool ran %d times, breaker %v; want 3 and open", calls.Load(), backend.State())
	}
	wantRefused(t, "after 3 consecutive failures (last failure: unavailable); next probe in 10s")
	clock.Advance(9 * time.Second)
	wantRefused(t, "next probe in 1s")

	// Past OpenFor: one probe is admitted; the others are refused while it
	// runs. It fails, and the breaker opens again.
	clock.Advance(2 * time.Second)
	release := make(chan struct{})
	hold.Store(&release)
	probe := make(chan error, 1)
	go func() { probe <- call() }()
	<-entered
	hold.Store(nil)
	if got := backend.State(); got != retry.StateHalfOpen {
		t.Errorf("breaker state during the probe = %v, want half_open", got)
	}
	wantRefused(t, "a probe call to test it is in flight")
	close(release)
	if err := <-probe; retry.Classify(err) != retry.Unavailable || errors.Is(err, retry.ErrBreakerOpen) {
		t.Fatalf("probe = %v, want the tool's own failure", err)
	}
	if got := backend.State(); got != retry.StateOpen {
		t.Fatalf("breaker after a failed probe = %v, want open", got)
	}
	wantRefused(t, "again after a probe call failed")

	// The next probe succeeds: closed, and calls flow again.
	clock.Advance(10 * time.Second)
	failing.Store(false)
	before := calls.Load()
	for i := range 3 {
		if err := call(); err != nil {
			t.Fatalf("call %d after the backend recovered = %v", i+1, err)
		}
	}
	if got := calls.Load() - before; got != 3 || backend.State() != retry.StateClosed {
		t.Errorf("after recovery: tool ran %d times, breaker %v; want 3 and closed", got, backend.State())
	}
	want := []retry.State{retry.StateOpen, retry.StateHalfOpen, retry.StateOpen, retry.StateHalfOpen, retry.StateClosed}
	if diff := cmp.Diff(want, transitions()); diff != "" {
		t.Errorf("breaker transitions (-want +got):\n%s", diff)
	}
}

// TestDispatchBreakerStopsRetries checks that a breaker opening during a
// call's retries ends them, and says so.
func TestDispatchBreakerStopsRetries(t *testing.T) {
	clock := retrytest.NewClock()
	backend := retry.NewBackends(retry.BackendsConfig{
		Breaker: retry.BreakerConfig{Failures: 2, FailureRatio: -1, OpenFor: time.Minute},
		Now:     clock.Now,
	}).Get("test:api")
	tool := &flakyTool{fails: 10, err: retry.Errorf(retry.Unavailable, "api down")}
	var retried []retry.Class
	dispatch, def := retryDispatcher(tool.run, retry.Plan{Policy: retry.Policy{Attempts: 5}, Idempotent: true, Rand: zeroRand, Backend: backend}, &retried)
	_, err := dispatch(t.Context(), Call{Tool: def, Thread: "x"})
	if got := retry.Classify(err); got != retry.Unavailable {
		t.Fatalf("Dispatch = %v (class %q), want unavailable", err, got)
	}
	if want := `api down; not retried: backend "test:api" is unavailable`; !strings.Contains(err.Error(), want) {
		t.Errorf("Dispatch error = %q, want it to contain %q", err, want)
	}
	if tool.calls.Load() != 2 || len(retried) != 1 {
		t.Errorf("the tool ran %d times with %d retries, want 2 and 1", tool.calls.Load(), len(retried))
	}
}

// TestDispatchRetryWaits runs in synctest bubbles: the backoff waits are
// virtual, so "at once" is exact.
func TestDispatchRetryWaits(t *testing.T) {
	t.Run("cancelled during the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tool := &flakyTool{fails: 1, err: retry.Errorf(retry.Unavailable, "busy")}
			plan := retry.Plan{
				Policy:     retry.Policy{Attempts: 3, InitialBackoff: time.Minute, MaxBackoff: time.Minute},
				Idempotent: true,
				Rand:       func() float64 { return 0.5 }, // a 30s wait
			}
			dispatch, def := retryDispatcher(tool.run, plan, nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			start := time.Now()
			errc := make(chan error, 1)
			go func() {
				_, err := dispatch(ctx, Call{Tool: def, Thread: "x"})
				errc <- err
			}()
			synctest.Wait() // the call waits to retry
			if tool.calls.Load() != 1 {
				t.Fatalf("the tool ran %d times before the wait, want 1", tool.calls.Load())
			}
			cancel()
			err := <-errc
			if got := retry.Classify(err); got != retry.Cancelled {
				t.Errorf("Dispatch = %v (class %q), want cancelled", err, got)
			}
			if elapsed := time.Since(start); elapsed != 0 {
				t.Errorf("Dispatch returned after %v, want at once", elapsed)
			}
			if tool.calls.Load() != 1 {
				t.Errorf("the tool ran %d times, want 1", tool.calls.Load())
			}
		})
	})

	tests := []struct {
		name       string
		timeout    time.Duration // the tool's
		ctxTimeout time.Duration // the caller's; 0 for none
		err        error
		wantMsg    string
	}{
		{
			name: "tool timeout shorter than the backoff", timeout: time.Second,
			err:     retry.Errorf(retry.Unavailable, "busy"),
			wantMsg: "busy; not retried: waiting 30s would pass the call's deadline (1s left)",
		},
		{
			name: "caller deadline shorter than the backoff", timeout: time.Hour, ctxTimeout: 2 * time.Second,
			err:     retry.Errorf(retry.Unavailable, "busy"),
			wantMsg: "busy; not retried: waiting 30s would pass the call's deadline (2s left)",
		},
		{
			name: "Retry-After past the deadline", timeout: 5 * time.Second,
			err:     &retry.Error{Class: retry.RateLimited, Msg: "slow down", RetryAfter: 40 * time.Second},
			wantMsg: "slow down; not retried: waiting 40s would pass the call's deadline (5s left)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tool := &flakyTool{fails: 1, err: tc.err}
				plan := retry.Plan{
					Policy:     retry.Policy{Attempts: 3, InitialBackoff: time.Minute, MaxBackoff: time.Minute},
					Idempotent: true,
					Rand:       func() float64 { return 0.5 },
				}
				dispatch, def := retryDispatcher(tool.run, plan, nil)
				def.Timeout = tc.timeout
				ctx := t.Context()
				if tc.ctxTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
					defer cancel()
				}
				start := time.Now()
				_, err := dispatch(ctx, Call{Tool: def, Thread: "x"})
				if got, want := retry.Classify(err), retry.Classify(tc.err); got != want {
					t.Errorf("Dispatch = %v (class %q), want the tool's class %q", err, got, want)
				}
				if err == nil || !strings.HasSuffix(err.Error(), tc.wantMsg) {
					t.Errorf("Dispatch error = %v, want it to end %q", err, tc.wantMsg)
				}
				if elapsed := time.Since(start); elapsed != 0 {
					t.Errorf("Dispatch returned after %v, want at once (no wait)", elapsed)
				}
				if tool.calls.Load() != 1 {
					t.Errorf("the tool ran %d times, want 1", tool.calls.Load())
				}
			})
		})
	}

	t.Run("waits the backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var at []time.Duration
			start := time.Now()
			fn := func(context.Context, map[string]any) (Result, error) {
				at = append(at, time.Since(start))
				if len(at) < 3 {
					return Result{}, retry.Errorf(retry.Timeout, "slow")
				}
				return Text("ok"), nil
			}
			plan := retry.Plan{
				Policy:     retry.Policy{Attempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute},
				Idempotent: true,
				Rand:       func() float64 { return 0.5 },
			}
			dispatch, def := retryDispatcher(fn, plan, nil)
			if _, err := dispatch(t.Context(), Call{Tool: def, Thread: "x"}); err != nil {
				t.Fatalf("Dispatch = %v", err)
			}
			// Full jitter at 0.5: half of 1s, then half of 2s.
			if diff := cmp.Diff([]time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond}, at); diff != "" {
				t.Errorf("attempt start times (-want +got):\n%s", diff)
			}
		})
	})
}

// fakeSelfRetrying is an executor that runs its own retry loop: the
// dispatcher calls it once, with the plan in Call.Retry.
type fakeSelfRetrying struct {
	calls atomic.Int64
	plan  retry.Plan
}

func (f *fakeSelfRetrying) Execute(_ context.Context, call Call) (Result, error) {
	f.calls.Add(1)
	f.plan = call.Retry
	return Result{}, retry.Errorf(retry.Unavailable, "down")
}

func (f *fakeSelfRetrying) RetriesItself() bool { return true }

func TestDispatchSelfRetrying(t *testing.T) {
	backend := retry.NewBackends(retry.BackendsConfig{}).Get("rest:api")
	plan := retry.Plan{Policy: retry.Policy{Attempts: 4}, Idempotent: true, Backend: backend, Subject: `tool "t"`}
	d := NewDispatcher(nil)
	e := &fakeSelfRetrying{}
	var attempts []int
	_, err := d.Dispatch(t.Context(), e, Call{Tool: &registry.Tool{Name: "t", Kind: registry.REST}, Thread: "x", Retry: plan,
		OnAttempt: func(n int) { attempts = append(attempts, n) }})
	if attempts != nil {
		t.Errorf("the Dispatcher called OnAttempt with %v, want no call (the executor reports its own attempts)", attempts)
	}
	if got := retry.Classify(err); got != retry.Unavailable || err.Error() != "down" {
		t.Errorf("Dispatch = %v (class %q), want the executor's error unchanged", err, got)
	}
	if e.calls.Load() != 1 {
		t.Errorf("the executor ran %d times, want 1 (it retries itself)", e.calls.Load())
	}
	if e.plan.Backend != backend || e.plan.Policy.Attempts != 4 || !e.plan.Idempotent {
		t.Errorf("Call.Retry = %+v, want the tool's plan", e.plan)
	}
}

// recordingExecutor records the Call.Retry it sees.
type recordingExecutor struct{ plan retry.Plan }

func (r *recordingExecutor) Execute(_ context.Context, call Call) (Result, error) {
	r.plan = call.Retry
	return Text("ok"), nil
}

// An executor the Dispatcher retries sees the zero Plan: only the
// Dispatcher retries it.
func TestDispatchHidesPlan(t *testing.T) {
	backend := retry.NewBackends(retry.BackendsConfig{}).Get("upstream:x")
	e := &recordingExecutor{}
	call := Call{Tool: &registry.Tool{Name: "t"}, Thread: "x", Retry: retry.Plan{Policy: retry.Policy{Attempts: 4}, Idempotent: true, Backend: backend}}
	if _, err := NewDispatcher(nil).Dispatch(t.Context(), e, call); err != nil {
		t.Fatalf("Dispatch = %v", err)
	}
	if e.plan.Backend != nil || e.plan.Idempotent || e.plan.Policy.Attempts != 0 {
		t.Errorf("Call.Retry seen by the executor = %+v, want the zero Plan", e.plan)
	}
}
