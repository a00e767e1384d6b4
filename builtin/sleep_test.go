package builtin_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/retry"
)

type sleepResult struct {
	res executors.Result
	err error
}

func TestSleep(t *testing.T) {
	fn := statelessFunc(t, "sleep", nil)
	for _, ms := range []float64{0, 1500, 60000} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			res, err := fn(t.Context(), map[string]any{"ms": ms})
			if err != nil {
				t.Fatalf("sleep(%v) = %v", ms, err)
			}
			if got, want := time.Since(start), time.Duration(ms)*time.Millisecond; got != want {
				t.Errorf("sleep(%v) took %v of bubble time, want %v", ms, got, want)
			}
			if got, want := text(t, res), "slept "+strconv.FormatFloat(ms, 'f', -1, 64)+" ms"; got != want {
				t.Errorf("sleep(%v) text = %q, want %q", ms, got, want)
			}
		})
	}
}

func TestSleepContextAlreadyDone(t *testing.T) {
	fn := statelessFunc(t, "sleep", nil)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Unix(0, 0))
	defer cancel2()
	tests := []struct {
		name      string
		ctx       context.Context
		ms        float64
		want      error
		wantClass retry.Class
	}{
		{"cancelled", cancelled, 60000, context.Canceled, retry.Cancelled},
		{"cancelled zero ms", cancelled, 0, context.Canceled, retry.Cancelled},
		{"deadline exceeded", expired, 60000, context.DeadlineExceeded, retry.Timeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fn(tc.ctx, map[string]any{"ms": tc.ms})
			if err != tc.want { //nolint:errorlint // the error must be ctx.Err() itself, unwrapped
				t.Fatalf("sleep = %v, want %v unwrapped", err, tc.want)
			}
			if got := retry.Classify(err); got != tc.wantClass {
				t.Errorf("Classify(%v) = %s, want %s", err, got, tc.wantClass)
			}
		})
	}
}

// TestSleepCancelledFromAnotherGoroutine cancels the call's ctx from a
// goroutine once the test signals it, while the call is (or is about to
// be) waiting.
func TestSleepCancelledFromAnotherGoroutine(t *testing.T) {
	fn := statelessFunc(t, "sleep", nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	signal := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-signal
		cancel()
	}()
	close(signal)
	_, err := fn(ctx, map[string]any{"ms": 60000.0})
	<-done
	if !errors.Is(err, context.Canceled) || err != context.Canceled { //nolint:errorlint // must be unwrapped
		t.Fatalf("sleep = %v, want context.Canceled unwrapped", err)
	}
}

// TestSleepCancelledWhileWaiting proves, in a synctest bubble, that the call
// was blocked in its wait when the ctx was cancelled or timed out, and that
// it returned at that instant of fake time rather than at the end of its
// sleep.
func TestSleepCancelledWhileWaiting(t *testing.T) {
	fn := statelessFunc(t, "sleep", nil)
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			start := time.Now()
			out := make(chan sleepResult, 1)
			go func() {
				res, err := fn(ctx, map[string]any{"ms": 60000.0})
				out <- sleepResult{res, err}
			}()
			synctest.Wait() // the call is now durably blocked in its wait
			select {
			case r := <-out:
				t.Fatalf("sleep returned %v, %v before its ctx was cancelled", r.res, r.err)
			default:
			}
			cancel()
			r := <-out
			if r.err != context.Canceled { //nolint:errorlint // must be unwrapped
				t.Fatalf("sleep = %v, want context.Canceled unwrapped", r.err)
			}
			if got := time.Since(start); got != 0 {
				t.Errorf("sleep returned after %v of bubble time, want 0s", got)
			}
		})
	})
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := fn(ctx, map[string]any{"ms": 60000.0})
			if err != context.DeadlineExceeded { //nolint:errorlint // must be unwrapped
				t.Fatalf("sleep = %v, want context.DeadlineExceeded unwrapped", err)
			}
			if got := retry.Classify(err); got != retry.Timeout {
				t.Errorf("Classify(%v) = %s, want timeout", err, got)
			}
			if got := time.Since(start); got != 250*time.Millisecond {
				t.Errorf("sleep returned after %v of bubble time, want 250ms", got)
			}
		})
	})
}

func TestSleepBadArgs(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
	}{
		{"missing", map[string]any{}},
		{"negative", map[string]any{"ms": -1.0}},
		{"too long", map[string]any{"ms": 60001.0}},
		{"fraction", map[string]any{"ms": 1.5}},
		{"string", map[string]any{"ms": "10"}},
		{"huge int", map[string]any{"ms": int64(1 << 40)}},
		{"unknown argument", map[string]any{"ms": 1.0, "seconds": 1.0}},
	}
	fn := statelessFunc(t, "sleep", nil)
	call := validated(t, register(t, nil, "sleep").tool(t, "sleep"), fn)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t.Context(), tc.args)
			wantClass(t, err, retry.Validation)
		})
	}
	// Go integers are accepted too, for embedders calling the function directly.
	synctest.Test(t, func(t *testing.T) {
		if _, err := fn(t.Context(), map[string]any{"ms": 5}); err != nil {
			t.Errorf("sleep(int 5) = %v, want success", err)
		}
	})
}
