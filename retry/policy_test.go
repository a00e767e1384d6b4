package retry

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPolicyNormalize(t *testing.T) {
	def := DefaultOn()
	tests := []struct {
		name string
		in   Policy
		want Policy
	}{
		{"zero", Policy{}, Policy{Attempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, On: def}},
		{"negative", Policy{Attempts: -1, InitialBackoff: -time.Second, MaxBackoff: -time.Second},
			Policy{Attempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, On: def}},
		{"set", Policy{Attempts: 1, InitialBackoff: time.Second, MaxBackoff: time.Minute, On: []Class{Execution}},
			Policy{Attempts: 1, InitialBackoff: time.Second, MaxBackoff: time.Minute, On: []Class{Execution}}},
		{"max below initial", Policy{Attempts: 2, InitialBackoff: 10 * time.Second},
			Policy{Attempts: 2, InitialBackoff: 10 * time.Second, MaxBackoff: 10 * time.Second, On: def}},
		{"empty on", Policy{On: []Class{}}, Policy{Attempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, On: def}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.in.Normalize()); diff != "" {
				t.Errorf("%+v.Normalize() mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestDefaultOnIsFresh(t *testing.T) {
	a := DefaultOn()
	a[0] = Validation
	if b := DefaultOn(); b[0] == Validation {
		t.Error("DefaultOn returned a shared slice")
	}
	want := []Class{Network, Timeout, Unavailable, RateLimited}
	if diff := cmp.Diff(want, DefaultOn()); diff != "" {
		t.Errorf("DefaultOn() mismatch (-want +got):\n%s", diff)
	}
}

func TestPolicyRetries(t *testing.T) {
	custom := Policy{On: []Class{Execution, Timeout}}
	for _, c := range Classes {
		t.Run(string(c), func(t *testing.T) {
			if got := (Policy{}).Retries(c); got != c.Transient() {
				t.Errorf("Policy{}.Retries(%q) = %v, want %v", c, got, c.Transient())
			}
			want := c == Execution || c == Timeout
			if got := custom.Retries(c); got != want {
				t.Errorf("Policy{On: [execution timeout]}.Retries(%q) = %v, want %v", c, got, want)
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
