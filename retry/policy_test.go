package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestPolicyNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   Policy
		want Policy
	}{
		{"zero", Policy{}, Policy{3, 100 * time.Millisecond, 5 * time.Second}},
		{"negative", Policy{-1, -time.Second, -time.Second}, Policy{3, 100 * time.Millisecond, 5 * time.Second}},
		{"set", Policy{1, time.Second, time.Minute}, Policy{1, time.Second, time.Minute}},
		{"max below initial", Policy{2, 10 * time.Second, 0}, Policy{2, 10 * time.Second, 10 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.Normalize(); got != tc.want {
				t.Errorf("%+v.Normalize() = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestPolicyBackoff(t *testing.T) {
	p := Policy{Attempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	almostOne := func() float64 { return 0.999999999 }
	half := func() float64 { return 0.5 }
	tests := []struct {
		name       string
		retry      int
		retryAfter time.Duration
		r          func() float64
		lo, hi     time.Duration // want lo <= got <= hi
	}{
		{"first retry, r=0", 1, 0, func() float64 { return 0 }, 0, 0},
		{"first retry, r=0.5", 1, 0, half, 50 * time.Millisecond, 50 * time.Millisecond},
		{"first retry, r→1", 1, 0, almostOne, 99 * time.Millisecond, 100 * time.Millisecond},
		{"second retry doubles", 2, 0, half, 100 * time.Millisecond, 100 * time.Millisecond},
		{"third retry", 3, 0, almostOne, 399 * time.Millisecond, 400 * time.Millisecond},
		{"capped at max", 5, 0, almostOne, 999 * time.Millisecond, time.Second},
		{"huge retry does not overflow", 10000, 0, almostOne, 999 * time.Millisecond, time.Second},
		{"retry 0 counts as 1", 0, 0, half, 50 * time.Millisecond, 50 * time.Millisecond},
		{"r out of range", 1, 0, func() float64 { return 7 }, 100 * time.Millisecond, 100 * time.Millisecond},
		{"negative r", 1, 0, func() float64 { return -3 }, 0, 0},
		{"retry-after wins", 1, 300 * time.Millisecond, half, 300 * time.Millisecond, 300 * time.Millisecond},
		{"retry-after capped", 1, time.Hour, half, time.Second, time.Second},
		{"nil r stays in bounds", 2, 0, nil, 0, 200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Backoff(tc.retry, tc.retryAfter, tc.r)
			if got < tc.lo || got > tc.hi {
				t.Errorf("Backoff(%d, %v) = %v, want in [%v, %v]", tc.retry, tc.retryAfter, got, tc.lo, tc.hi)
			}
		})
	}
	t.Run("zero policy uses defaults", func(t *testing.T) {
		if got := (Policy{}).Backoff(1, 0, almostOne); got > DefaultInitialBackoff || got < DefaultInitialBackoff-time.Millisecond {
			t.Errorf("Policy{}.Backoff(1) = %v, want about %v", got, DefaultInitialBackoff)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"spaces", "  7 ", 7 * time.Second, true},
		{"empty", "", 0, false},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"absurd seconds capped", "999999999", MaxRetryAfter, true},
		{"overflowing seconds capped", "99999999999999999999999999", MaxRetryAfter, true},
		{"IMF-fixdate", "Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true},
		{"RFC 850 date", "Sunday, 01-Mar-26 12:01:00 GMT", time.Minute, true},
		{"asctime date", "Sun Mar  1 12:00:10 2026", 10 * time.Second, true},
		{"past date", "Fri, 31 Dec 1999 23:59:59 GMT", 0, true},
		{"far future date capped", "Fri, 31 Dec 2100 23:59:59 GMT", MaxRetryAfter, true},
		{"date with other zone", "Sun, 01 Mar 2026 12:00:30 CET", 0, false},
		{"date garbage", "Sun, 99 Mar 2026 12:00:30 GMT", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.in, now)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v, want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "Sun, 01 Mar 2026 12:00:30 GMT", "Sunday, 01-Mar-26 12:01:00 GMT",
		"Sun Mar  1 12:00:10 2026", "99999999999999999999", " 3 ", "x"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, now)
		if !ok && d != 0 {
			t.Errorf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", s, d)
		}
		if d < 0 || d > MaxRetryAfter {
			t.Errorf("ParseRetryAfter(%q) = %v, want within [0, %v]", s, d, MaxRetryAfter)
		}
	})
}

func TestDo(t *testing.T) {
	unavailable := Errorf(Unavailable, "try later")
	tests := []struct {
		name         string
		idempotent   bool
		failures     []error // returned by attempts 1..n; then success
		wantAttempts int
		wantClass    Class // "" for success
	}{
		{"success first", true, nil, 1, ""},
		{"retries then success", true, []error{unavailable, Errorf(Network, "reset")}, 3, ""},
		{"gives up after attempts", true, []error{unavailable, unavailable, unavailable, unavailable}, 3, Unavailable},
		{"non-idempotent not retried", false, []error{unavailable}, 1, Unavailable},
		{"non-transient not retried", true, []error{Errorf(Validation, "bad")}, 1, Validation},
		{"unclassified is internal, not retried", true, []error{errors.New("boom")}, 1, Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				calls := 0
				n, err := Do(t.Context(), Policy{Attempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Second}, tc.idempotent,
					func(_ context.Context, attempt int) error {
						calls++
						if attempt != calls {
							t.Errorf("attempt = %d on call %d", attempt, calls)
						}
						if attempt <= len(tc.failures) {
							return tc.failures[attempt-1]
						}
						return nil
					})
				if n != tc.wantAttempts || calls != tc.wantAttempts {
					t.Errorf("Do attempts = %d (fn called %d times), want %d", n, calls, tc.wantAttempts)
				}
				if got := Classify(err); got != tc.wantClass {
					t.Errorf("Do error = %v (class %q), want class %q", err, got, tc.wantClass)
				}
				// Each wait is at most 1s of fake time.
				if elapsed := time.Since(start); elapsed > time.Duration(n-1)*time.Second {
					t.Errorf("Do took %v for %d attempts, want at most %v", elapsed, n, time.Duration(n-1)*time.Second)
				}
			})
		})
	}
}

func TestDoHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		start := time.Now()
		n, err := Do(t.Context(), Policy{Attempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Second}, true,
			func(context.Context, int) error {
				at = append(at, time.Since(start))
				if len(at) < 3 {
					return &Error{Class: RateLimited, Msg: "slow down", RetryAfter: 4 * time.Second}
				}
				return nil
			})
		if err != nil || n != 3 {
			t.Fatalf("Do = %d, %v, want 3, nil", n, err)
		}
		want := []time.Duration{0, 4 * time.Second, 8 * time.Second}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("attempt %d at %v, want %v", i+1, at[i], want[i])
			}
		}
	})
}

func TestDoStopsBeforeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		last := &Error{Class: RateLimited, Msg: "slow down", RetryAfter: 5 * time.Second}
		n, err := Do(ctx, Policy{Attempts: 5, MaxBackoff: time.Minute}, true, func(context.Context, int) error { return last })
		if n != 1 || err != last {
			t.Errorf("Do = %d, %v, want 1, the last failure", n, err)
		}
		if elapsed := time.Since(start); elapsed != 0 {
			t.Errorf("Do waited %v, want no wait: the retry would start after the deadline", elapsed)
		}
	})
}

func TestDoCancelStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		time.AfterFunc(time.Second, cancel) // fake time: during the first wait
		n, err := Do(ctx, Policy{Attempts: 5, InitialBackoff: time.Hour, MaxBackoff: time.Hour}, true,
			func(context.Context, int) error {
				return &Error{Class: Unavailable, Msg: "down", RetryAfter: time.Hour}
			})
		if n != 1 {
			t.Errorf("Do attempts = %d, want 1", n)
		}
		if Classify(err) != Cancelled || !errors.Is(err, context.Canceled) {
			t.Errorf("Do error = %v (class %q), want cancelled", err, Classify(err))
		}
		if elapsed := time.Since(start); elapsed != time.Second {
			t.Errorf("Do returned after %v, want %v (at the cancellation)", elapsed, time.Second)
		}
	})
}
