package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"

	"github.com/toolgate/toolgate/retry/retrytest"
)

// executeVia is execute with the call going through backend, as the
// dispatcher passes it in Call.Retry.
func executeVia(ctx context.Context, tool *testTool, backend *retry.Backend) (executors.Result, error) {
	call := tool.call(nil)
	call.Retry.Backend = backend
	return tool.exec.Execute(ctx, call)
}

// switchServer is a test server that answers 503 while its fail count is
// positive (decrementing it), else 200 {"ok":true}; it counts requests.
type switchServer struct {
	url  string
	fail atomic.Int64
	hits atomic.Int64
}

func startSwitchServer(t *testing.T, fail int64) *switchServer {
	t.Helper()
	s := &switchServer{}
	s.fail.Store(fail)
	s.url = startServer(t, func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if s.fail.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
			return
		}
		s.fail.Store(0)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}).URL
	return s
}

func TestBackendRetryThenSuccess(t *testing.T) {
	for _, k := range []int64{0, 1, 2, 3} {
		t.Run(fmt.Sprintf("%d failures", k), func(t *testing.T) {
			srv := startSwitchServer(t, k)
			var retries atomic.Int64
			e := newTestExecutor(t, &Options{Rand: zeroRand, OnRetry: func(string, retry.Class) { retries.Add(1) }})
			tool := mustAdd(t, e, Spec{URL: srv.url + "/x"}, retry.Policy{Attempts: 4, InitialBackoff: time.Millisecond})
			backend := retry.NewBackends(retry.BackendsConfig{}).Get("rest:x")
			res, err := executeVia(t.Context(), tool, backend)
			if err != nil {
				t.Fatalf("Execute = %v", err)
			}
			if got := attemptsOf(res); got != int(k+1) {
				t.Errorf("Meta attempts = %v, want %d", got, k+1)
			}
			if got := srv.hits.Load(); got != k+1 {
				t.Errorf("server saw %d requests, want %d", got, k+1)
			}
			if got := retries.Load(); got != k {
				t.Errorf("OnRetry called %d times, want %d", got, k)
			}
			if got := backend.State(); got != retry.StateClosed {
				t.Errorf("breaker = %v, want closed", got)
			}
		})
	}
}

func TestRetryBudget(t *testing.T) {
	srv := startSwitchServer(t, 1)
	var exhausted []string
	backends := retry.NewBackends(retry.BackendsConfig{
		Budget:            retry.BudgetConfig{Ratio: -1, MinRetries: 1}, // one retry per window, whatever the calls
		Breaker:           retry.BreakerConfig{Disabled: true},
		Now:               retrytest.NewClock().Now,
		OnBudgetExhausted: func(b string) { exhausted = append(exhausted, b) },
	})
	backend := backends.Get("rest:x")
	e := newTestExecutor(t, &Options{Rand: zeroRand})
	tool := mustAdd(t, e, Spec{URL: srv.url + "/x"}, retry.Policy{Attempts: 3, InitialBackoff: time.Millisecond})

	// The first call spends the one retry, and succeeds.
	res, err := executeVia(t.Context(), tool, backend)
	if err != nil || attemptsOf(res) != 2 || srv.hits.Load() != 2 {
		t.Fatalf("first call = %v (attempts %v, %d requests), want success after 2 attempts", err, attemptsOf(res), srv.hits.Load())
	}
	if len(exhausted) != 0 {
		t.Errorf("OnBudgetExhausted called %v after a granted retry", exhausted)
	}

	// The second fails and is not retried: the budget is spent.
	srv.fail.Store(1)
	_, err = executeVia(t.Context(), tool, backend)
	re := asRetryError(t, err)
	want := fmt.Sprintf(`GET %s/x returned 503 Service Unavailable after 1 attempt: busy; not retried: the retry budget of backend "rest:x" is spent (it allows 1 retry per 10s)`, srv.url)
	if re.Class != retry.Unavailable || err.Error() != want {
		t.Errorf("second call = %q (class %q), want unavailable %q", err, re.Class, want)
	}
	if got := srv.hits.Load(); got != 3 {
		t.Errorf("server saw %d requests in all, want 3 (the second call not retried)", got)
	}
	if diff := cmp.Diff([]string{"rest:x"}, exhausted); diff != "" {
		t.Errorf("OnBudgetExhausted backends (-want +got):\n%s", diff)
	}
}

func TestBreakerOpens(t *testing.T) {
	tests := []struct {
		name     string
		attempts int // the tool's
		calls    int // failing calls that open the breaker
		wantMsg  string
	}{
		{"one attempt per call", 1, 3, "; not retried: the retry policy of tool \"tool\" allows only 1 attempt"},
		{"retries stop when it opens", 5, 1, `; not retried: backend "rest:x" is unavailable: its circuit breaker opened after 3 consecutive failures; next probe in 30s`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startSwitchServer(t, 1000)
			clock := retrytest.NewClock()
			backend := retry.NewBackends(retry.BackendsConfig{
				Breaker: retry.BreakerConfig{Failures: 3, FailureRatio: -1, OpenFor: 30 * time.Second},
				Now:     clock.Now,
			}).Get("rest:x")
			e := newTestExecutor(t, &Options{Rand: zeroRand})
			tool := mustAdd(t, e, Spec{URL: srv.url + "/x"}, retry.Policy{Attempts: tc.attempts, InitialBackoff: time.Millisecond})

			for i := range tc.calls {
				_, err := executeVia(t.Context(), tool, backend)
				if re := asRetryError(t, err); re.Class != retry.Unavailable || !strings.HasSuffix(err.Error(), tc.wantMsg) {
					t.Fatalf("call %d = %q (class %q), want unavailable ending %q", i+1, err, re.Class, tc.wantMsg)
				}
			}
			if got := srv.hits.Load(); got != 3 {
				t.Errorf("server saw %d requests, want 3", got)
			}
			if got := backend.State(); got != retry.StateOpen {
				t.Fatalf("breaker = %v, want open", got)
			}

			// Open: the call fails at once and never reaches the server.
			_, err := executeVia(t.Context(), tool, backend)
			re := asRetryError(t, err)
			wantPrefix := `backend "rest:x" is unavailable: its circuit breaker opened after 3 consecutive failures (last failure: 503 Service Unavailable); next probe in 30s`
			if re.Class != retry.Unavailable || !errors.Is(err, retry.ErrBreakerOpen) || err.Error() != wantPrefix {
				t.Errorf("call while open = %q (class %q), want the breaker's refusal %q", err, re.Class, wantPrefix)
			}
			if re.RetryAfter != 30*time.Second {
				t.Errorf("refusal RetryAfter = %v, want 30s", re.RetryAfter)
			}
			if got := srv.hits.Load(); got != 3 {
				t.Errorf("server saw %d requests after the refused call, want still 3", got)
			}

			// Past OpenFor, with the server healthy: the probe succeeds
			// and closes the breaker.
			srv.fail.Store(0)
			clock.Advance(30 * time.Second)
			res, err := executeVia(t.Context(), tool, backend)
			if err != nil || attemptsOf(res) != 1 {
				t.Fatalf("probe = %v (attempts %v), want success in 1 attempt", err, attemptsOf(res))
			}
			if got := backend.State(); got != retry.StateClosed {
				t.Errorf("breaker after a successful probe = %v, want closed", got)
			}
			if got := srv.hits.Load(); got != 4 {
				t.Errorf("server saw %d requests, want 4", got)
			}
		})
	}
}

// TestRetryAfterWithBackend runs in synctest bubbles over an in-memory
// transport: the breaker and the budget read the bubble's clock, and the
// waits are exact.
func TestRetryAfterWithBackend(t *testing.T) {
	t.Run("honoured", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var at []time.Duration
			h := func(w http.ResponseWriter, r *http.Request) {
				at = append(at, time.Since(start))
				if len(at) <= 2 {
					reply(503, "2")(w)
					return
				}
				io.WriteString(w, "done")
			}
			e := New(&Options{Transport: handlerTransport(h), Rand: zeroRand})
			defer e.Close()
			tool := mustAdd(t, e, Spec{URL: "http://api.test/x"}, retry.Policy{Attempts: 3, MaxBackoff: time.Minute})
			backend := retry.NewBackends(retry.BackendsConfig{}).Get("rest:api.test")
			res, err := executeVia(t.Context(), tool, backend)
			if err != nil || attemptsOf(res) != 3 {
				t.Fatalf("Execute = %v (attempts %v), want success after 3 attempts", err, attemptsOf(res))
			}
			if diff := cmp.Diff([]time.Duration{0, 2 * time.Second, 4 * time.Second}, at); diff != "" {
				t.Errorf("attempt start times (-want +got):\n%s", diff)
			}
		})
	})

	t.Run("breaker opens during the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var hits atomic.Int64
			h := func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				reply(503, "5")(w)
			}
			var retries atomic.Int64
			e := New(&Options{Transport: handlerTransport(h), Rand: zeroRand, OnRetry: func(string, retry.Class) { retries.Add(1) }})
			defer e.Close()
			tool := mustAdd(t, e, Spec{URL: "http://api.test/x"}, retry.Policy{Attempts: 3, MaxBackoff: time.Minute})
			backend := retry.NewBackends(retry.BackendsConfig{
				Breaker: retry.BreakerConfig{Failures: 2, FailureRatio: -1, OpenFor: time.Minute},
			}).Get("rest:api.test")
			start := time.Now()
			errc := make(chan error, 1)
			go func() {
				_, err := executeVia(t.Context(), tool, backend)
				errc <- err
			}()
			synctest.Wait() // the call waits 5s to retry
			// Another call's failure opens the breaker meanwhile.
			permit, err := backend.Admit(1)
			if err != nil {
				t.Fatalf("Admit = %v, want the breaker closed still", err)
			}
			permit.Record(retry.Errorf(retry.Network, "reset by another call"))
			if backend.State() != retry.StateOpen {
				t.Fatalf("breaker = %v, want open", backend.State())
			}
			err = <-errc
			re := asRetryError(t, err)
			wantPrefix := `GET http://api.test/x returned 503 Service Unavailable after 1 attempt; not retried: backend "rest:api.test" is unavailable: its circuit breaker opened after 2 consecutive failures (last failure: network error); next probe in 55s`
			if re.Class != retry.Unavailable || err.Error() != wantPrefix {
				t.Errorf("Execute = %q (class %q), want unavailable %q", err, re.Class, wantPrefix)
			}
			if hits.Load() != 1 {
				t.Errorf("server saw %d requests, want 1 (the retry was refused)", hits.Load())
			}
			if got := retries.Load(); got != 0 {
				t.Errorf("OnRetry called %d times, want 0 (the retry was refused)", got)
			}
			if elapsed := time.Since(start); elapsed != 5*time.Second {
				t.Errorf("Execute returned after %v, want 5s (the Retry-After wait)", elapsed)
			}
		})
	})
}

// TestBreakerRefusesLaterRetry runs in synctest bubbles: the first retry
// is made, and other calls' failures open the breaker during the wait
// before the second, which is refused. The error is the second attempt's
// failure, in the form of any failure not retried, and OnRetry heard of
// the one retry made.
func TestBreakerRefusesLaterRetry(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name        string
		transport   http.RoundTripper
		openAt      time.Duration // when another call's failure opens the breaker
		want        string
		wantClass   retry.Class // the last attempt's
		wantElapsed time.Duration
	}{
		{
			name: "status",
			transport: handlerTransport(func(w http.ResponseWriter, r *http.Request) {
				reply(503, "5")(w)
				io.WriteString(w, "busy")
			}),
			openAt: 7 * time.Second, // attempts at 0s and 5s; the refused retry at 10s
			want: `GET http://api.test/x returned 503 Service Unavailable after 2 attempts: busy; not retried: backend "rest:api.test" is unavailable: ` +
				`its circuit breaker opened after 3 consecutive failures (last failure: network error: connection refused); next probe in 57s`,
			wantClass:   retry.Unavailable,
			wantElapsed: 10 * time.Second,
		},
		{
			name: "transport error",
			transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
				return nil, refused
			}),
			openAt: 3 * time.Second, // attempts at 0s and 2s; the refused retry at 6s
			want: `GET http://api.test/x failed after 2 attempts: dial tcp: connect: connection refused; not retried: backend "rest:api.test" is unavailable: ` +
				`its circuit breaker opened after 3 consecutive failures (last failure: network error: connection refused); next probe in 57s`,
			wantClass:   retry.Network,
			wantElapsed: 6 * time.Second,
		},
		{
			name: "body cut short",
			transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
				body := io.MultiReader(strings.NewReader(`{"ok":`), iotest.ErrReader(io.ErrUnexpectedEOF))
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(body), ContentLength: -1}, nil
			}),
			openAt: 3 * time.Second,
			want: `GET http://api.test/x failed after 2 attempts: unexpected EOF; not retried: backend "rest:api.test" is unavailable: ` +
				`its circuit breaker opened after 3 consecutive failures (last failure: network error: connection refused); next probe in 57s`,
			wantClass:   retry.Network,
			wantElapsed: 6 * time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var retries []retry.Class
				e := New(&Options{
					Transport: tc.transport,
					Rand:      func() float64 { return 0.5 },
					OnRetry:   func(_ string, c retry.Class) { retries = append(retries, c) },
				})
				defer e.Close()
				tool := mustAdd(t, e, Spec{URL: "http://api.test/x"}, retry.Policy{Attempts: 3, InitialBackoff: 4 * time.Second, MaxBackoff: time.Minute})
				backend := retry.NewBackends(retry.BackendsConfig{
					Breaker: retry.BreakerConfig{Failures: 3, FailureRatio: -1, OpenFor: time.Minute},
				}).Get("rest:api.test")
				start := time.Now()
				time.AfterFunc(tc.openAt, func() {
					// Other calls fail until the breaker opens.
					for backend.State() != retry.StateOpen {
						permit, err := backend.Admit(1)
						if err != nil {
							t.Errorf("another call's Admit = %v, want the breaker closed still", err)
							return
						}
						permit.Record(&retry.Error{Class: retry.Network, Msg: "GET http://api.test/other failed", Err: refused})
					}
				})
				_, err := executeVia(t.Context(), tool, backend)
				re := asRetryError(t, err)
				if re.Class != tc.wantClass || err.Error() != tc.want {
					t.Errorf("Execute = %q (class %q),\nwant %q (class %q)", err, re.Class, tc.want, tc.wantClass)
				}
				if backend.State() != retry.StateOpen {
					t.Errorf("breaker = %v, want open", backend.State())
				}
				if len(retries) != 1 {
					t.Errorf("OnRetry calls %v, want one (the second retry was refused)", retries)
				}
				if elapsed := time.Since(start); elapsed != tc.wantElapsed {
					t.Errorf("Execute returned after %v, want %v", elapsed, tc.wantElapsed)
				}
			})
		})
	}
}

// TestPanicReleasesProbe checks that a probe whose call panics (here in
// the OnResponse hook, before the outcome is recorded) does not hold its
// breaker half-open: the next call probes.
func TestPanicReleasesProbe(t *testing.T) {
	clock := retrytest.NewClock()
	backend := retry.NewBackends(retry.BackendsConfig{
		Breaker: retry.BreakerConfig{Failures: 1, FailureRatio: -1, OpenFor: 10 * time.Second},
		Now:     clock.Now,
	}).Get("rest:api.test")
	var panicking atomic.Bool
	e := newTestExecutor(t, &Options{
		Transport: handlerTransport(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		OnResponse: func(string, int) {
			if panicking.Load() {
				panic("hook bug")
			}
		},
	})
	tool := mustAdd(t, e, Spec{URL: "http://api.test/x"})
	p, _ := backend.Admit(1)
	p.Record(retry.Errorf(retry.Network, "down"))
	clock.Advance(10 * time.Second)

	panicking.Store(true)
	func() {
		defer func() {
			if r := recover(); r != "hook bug" {
				t.Errorf("recover() = %v, want the hook's panic passed on", r)
			}
		}()
		executeVia(t.Context(), tool, backend)
	}()
	if got := backend.State(); got != retry.StateHalfOpen {
		t.Fatalf("breaker after the probe panicked = %v, want half_open", got)
	}
	panicking.Store(false)
	res, err := executeVia(t.Context(), tool, backend)
	if err != nil || attemptsOf(res) != 1 {
		t.Fatalf("call after the panic = %v (attempts %v), want the next probe admitted and successful", err, attemptsOf(res))
	}
	if got := backend.State(); got != retry.StateClosed {
		t.Errorf("breaker after the next probe = %v, want closed", got)
	}
}

// TestCancelledCallsAreNoFailures cancels calls while the backend holds
// their requests: the caller gave up, the backend did not fail, so the
// breaker neither opens nor, half-open, counts a cancelled probe as failed.
func TestCancelledCallsAreNoFailures(t *testing.T) {
	tests := []struct {
		name     string
		open     bool // open the breaker first, so that the first call is its probe
		calls    int  // cancelled calls
		wantMid  retry.State
		wantHits int64 // requests the cancelled calls made
	}{
		{"closed: cancelled calls do not open it", false, 3, retry.StateClosed, 3},
		{"half-open: a cancelled probe frees the slot", true, 1, retry.StateHalfOpen, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hold atomic.Bool
			var hits atomic.Int64
			entered := make(chan struct{})
			srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				if hold.Load() {
					// Hold the request until the client cancels it.
					select {
					case entered <- struct{}{}:
					case <-r.Context().Done():
					}
					<-r.Context().Done()
					return
				}
				io.WriteString(w, "ok")
			})
			clock := retrytest.NewClock()
			backend := retry.NewBackends(retry.BackendsConfig{
				Breaker: retry.BreakerConfig{Failures: 2, FailureRatio: -1, OpenFor: 10 * time.Second},
				Now:     clock.Now,
			}).Get("rest:x")
			e := newTestExecutor(t, &Options{Rand: zeroRand})
			tool := mustAdd(t, e, Spec{URL: srv.URL + "/x"}, retry.Policy{Attempts: 3, InitialBackoff: time.Millisecond})
			if tc.open {
				for range 2 {
					p, _ := backend.Admit(1)
					p.Record(retry.Errorf(retry.Network, "down"))
				}
				clock.Advance(10 * time.Second)
			}

			hold.Store(true)
			for i := range tc.calls {
				ctx, cancel := context.WithCancel(t.Context())
				errc := make(chan error, 1)
				go func() {
					_, err := executeVia(ctx, tool, backend)
					errc <- err
				}()
				select {
				case <-entered:
				case err := <-errc:
					cancel()
					t.Fatalf("call %d = %v before it reached the server, want it held there", i+1, err)
				}
				cancel()
				if err := <-errc; retry.Classify(err) != retry.Cancelled {
					t.Fatalf("call %d = %v (class %q), want cancelled", i+1, err, retry.Classify(err))
				}
			}
			if got := hits.Load(); got != tc.wantHits {
				t.Errorf("server saw %d requests from the cancelled calls, want %d (no retries)", got, tc.wantHits)
			}
			if got := backend.State(); got != tc.wantMid {
				t.Fatalf("breaker after the cancelled calls = %v, want %v", got, tc.wantMid)
			}

			hold.Store(false)
			res, err := executeVia(t.Context(), tool, backend)
			if err != nil || attemptsOf(res) != 1 {
				t.Fatalf("call after the cancelled ones = %v (attempts %v), want success in 1 attempt", err, attemptsOf(res))
			}
			if got := backend.State(); got != retry.StateClosed {
				t.Errorf("breaker after a successful call = %v, want closed", got)
			}
		})
	}
}

// TestRefusalHidesFailedRequest checks that the breaker's refusal, which
// every caller sees, says nothing of the call whose failure opened it: not
// its path, not its query, not its arguments.
func TestRefusalHidesFailedRequest(t *testing.T) {
	busy := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "no capacity for "+r.URL.Path)
	})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // its port refuses connections
	tests := []struct {
		name     string
		url      string
		wantLast string
	}{
		{"status", busy.URL, "(last failure: 503 Service Unavailable)"},
		{"connection refused", closed.URL, "(last failure: network error: connection refused)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backend := retry.NewBackends(retry.BackendsConfig{
				Breaker: retry.BreakerConfig{Failures: 2, FailureRatio: -1},
			}).Get("rest:api")
			e := newTestExecutor(t, nil)
			tool := mustAdd(t, e, Spec{URL: tc.url + "/users/{user}", Query: map[string]string{"q": "{q}"}}, retry.Policy{Attempts: 1})
			call := func(user, q string) error {
				call := tool.call(map[string]any{"user": user, "q": q})
				call.Retry.Backend = backend
				_, err := tool.exec.Execute(t.Context(), call)
				return err
			}
			for i := range 2 {
				if err := call("alice-private", "secret-query"); errors.Is(err, retry.ErrBreakerOpen) || !strings.Contains(err.Error(), "alice-private") {
					t.Fatalf("call %d = %v, want the backend's failure, naming its own path", i+1, err)
				}
			}
			err := call("bob", "x")
			if !errors.Is(err, retry.ErrBreakerOpen) || !strings.Contains(err.Error(), tc.wantLast) {
				t.Fatalf("call while open = %q, want the breaker's refusal saying %q", err, tc.wantLast)
			}
			for _, leak := range []string{"alice-private", "secret-query", "/users", "capacity"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("refusal %q quotes %q from another call", err, leak)
				}
			}
		})
	}
}

// TestOneDecisionPerAttempt sends responses whose body breaks off after a
// few bytes. Each attempt gets one retry decision, on one outcome: the
// status of an error response (an excerpt that cannot be read changes
// nothing the backend said), or a network error for a success whose body
// did not arrive. A second decision on the same attempt would retry a 404,
// or turn a 503 that used up the attempts into a network error.
func TestOneDecisionPerAttempt(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		want        string
		wantClass   retry.Class
		wantRetries []retry.Class
	}{
		{
			name:      "404 not retried",
			status:    404,
			want:      `GET http://api.test/x returned 404 Not Found after 1 attempt`,
			wantClass: retry.NotFound,
		},
		{
			name:        "503 on the last attempt stays a 503",
			status:      503,
			want:        `GET http://api.test/x returned 503 Service Unavailable after 3 attempts`,
			wantClass:   retry.Unavailable,
			wantRetries: []retry.Class{retry.Unavailable, retry.Unavailable},
		},
		{
			name:        "200 without its body is a network error",
			status:      200,
			want:        `GET http://api.test/x failed after 3 attempts: unexpected EOF`,
			wantClass:   retry.Network,
			wantRetries: []retry.Class{retry.Network, retry.Network},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var codes []int
				var retries []retry.Class
				e := New(&Options{
					Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
						body := io.MultiReader(strings.NewReader(`{"error":`), iotest.ErrReader(io.ErrUnexpectedEOF))
						return &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(body), ContentLength: -1, Request: r}, nil
					}),
					Rand:       zeroRand,
					OnResponse: func(_ string, code int) { codes = append(codes, code) },
					OnRetry:    func(_ string, c retry.Class) { retries = append(retries, c) },
				})
				defer e.Close()
				tool := mustAdd(t, e, Spec{URL: "http://api.test/x"}, retry.Policy{Attempts: 3, InitialBackoff: time.Second})
				_, err := execute(t.Context(), tool, nil)
				re := asRetryError(t, err)
				if re.Class != tc.wantClass || err.Error() != tc.want {
					t.Errorf("Execute = %q (class %q),\nwant %q (class %q)", err, re.Class, tc.want, tc.wantClass)
				}
				if diff := cmp.Diff(tc.wantRetries, retries); diff != "" {
					t.Errorf("OnRetry classes (-want +got):\n%s", diff)
				}
				wantCodes := make([]int, len(tc.wantRetries)+1)
				for i := range wantCodes {
					wantCodes[i] = tc.status
				}
				if diff := cmp.Diff(wantCodes, codes); diff != "" {
					t.Errorf("OnResponse codes, one per attempt (-want +got):\n%s", diff)
				}
			})
		})
	}
}
