package builtin_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/builtin"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/retry"
)

func TestClockNow(t *testing.T) {
	fixed := time.Date(2025, time.June, 15, 12, 30, 45, 123456789, time.UTC)
	winter := time.Date(2025, time.January, 15, 12, 30, 45, 0, time.UTC)
	tests := []struct {
		name     string
		now      time.Time
		args     map[string]any
		wantTime string
		wantZone string
	}{
		{"default is UTC", fixed, map[string]any{}, "2025-06-15T12:30:45Z", "UTC"},
		{"explicit UTC", fixed, map[string]any{"timezone": "UTC"}, "2025-06-15T12:30:45Z", "UTC"},
		{"null timezone", fixed, map[string]any{"timezone": nil}, "2025-06-15T12:30:45Z", "UTC"},
		{"Paris summer", fixed, map[string]any{"timezone": "Europe/Paris"}, "2025-06-15T14:30:45+02:00", "Europe/Paris"},
		{"Paris winter", winter, map[string]any{"timezone": "Europe/Paris"}, "2025-01-15T13:30:45+01:00", "Europe/Paris"},
		{"New York", fixed, map[string]any{"timezone": "America/New_York"}, "2025-06-15T08:30:45-04:00", "America/New_York"},
		{"Kolkata half hour", fixed, map[string]any{"timezone": "Asia/Kolkata"}, "2025-06-15T18:00:45+05:30", "Asia/Kolkata"},
		{"Kiritimati next day", fixed, map[string]any{"timezone": "Pacific/Kiritimati"}, "2025-06-16T02:30:45+14:00", "Pacific/Kiritimati"},
	}
	tool := register(t, nil, "clock_now").tool(t, "clock_now")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn := statelessFunc(t, "clock_now", &builtin.Options{Now: func() time.Time { return tc.now }})
			res, err := fn(t.Context(), tc.args)
			if err != nil {
				t.Fatalf("clock_now(%v) = %v", tc.args, err)
			}
			want := map[string]any{"time": tc.wantTime, "timezone": tc.wantZone, "unix": tc.now.Unix()}
			if diff := cmp.Diff(want, res.Structured); diff != "" {
				t.Errorf("clock_now(%v) structured mismatch (-want +got):\n%s", tc.args, diff)
			}
			if got := text(t, res); got != tc.wantTime {
				t.Errorf("clock_now(%v) text = %q, want %q", tc.args, got, tc.wantTime)
			}
			checkOutput(t, tool, res)
		})
	}
}

func TestClockNowErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    map[string]any
		wantMsg string // exact message, when not empty
	}{
		{"unknown zone", map[string]any{"timezone": "Mars/Base"}, `clock_now: unknown time zone "Mars/Base"; use an IANA name like Europe/Paris`},
		{"Local is not IANA", map[string]any{"timezone": "Local"}, `clock_now: unknown time zone "Local"; use an IANA name like Europe/Paris`},
		{"path traversal", map[string]any{"timezone": "../../etc/passwd"}, ""},
		{"absolute path", map[string]any{"timezone": "/etc/localtime"}, ""},
		{"too long", map[string]any{"timezone": "Europe/" + strings.Repeat("x", 58)}, "clock_now: time zone name is 65 bytes long, more than 64; use an IANA name like Europe/Paris"},
		{"not a string", map[string]any{"timezone": 2.0}, `clock_now: argument "timezone" must be a string`},
		{"unknown argument", map[string]any{"tz": "UTC"}, ""},
	}
	fn := statelessFunc(t, "clock_now", &builtin.Options{Now: func() time.Time { return time.Unix(0, 0) }})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fn(t.Context(), tc.args)
			wantClass(t, err, retry.Validation)
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Errorf("clock_now(%v) error = %q, want %q", tc.args, err, tc.wantMsg)
			}
		})
	}
	// A 64-byte name is looked up, not rejected for its length.
	_, err := fn(t.Context(), map[string]any{"timezone": "Europe/" + strings.Repeat("x", 57)})
	if err == nil || !strings.Contains(err.Error(), "unknown time zone") {
		t.Errorf("clock_now(64-byte name) = %v, want an unknown time zone error", err)
	}
}

// TestClockNowPolled: a model that polls clock_now in one thread of a
// gateway with the default loop guard (threshold 3, block) is not
// refused while the time it reads changes; a clock stuck on one second
// returns the same result each time, and the call after three of those is
// refused.
func TestClockNowPolled(t *testing.T) {
	tests := []struct {
		name string
		tick time.Duration // how far the clock moves between calls
		want []bool        // for each call, whether it runs
	}{
		{"a moving clock", time.Second, []bool{true, true, true, true, true, true, true, true}},
		{"a stopped clock", 0, []bool{true, true, true, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Default(nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Builtin = nil
			g, err := gateway.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			now := time.Date(2025, time.June, 15, 12, 30, 45, 0, time.UTC)
			var reads atomic.Int64
			clock := func() time.Time {
				return now.Add(time.Duration(reads.Add(1)) * tc.tick)
			}
			if err := builtin.Register(g, []string{"clock_now"}, &builtin.Options{Now: clock}); err != nil {
				t.Fatal(err)
			}
			meta := map[string]any{gateway.ThreadMetaKey: "poll"}
			for i, wantRun := range tc.want {
				before := reads.Load()
				res, err := g.Call(t.Context(), "clock_now", json.RawMessage(`{}`), meta)
				if err != nil {
					t.Fatalf("call %d: Call(clock_now, {}) error %v", i+1, err)
				}
				ran := reads.Load() > before
				if ran != wantRun || res.IsError == wantRun {
					t.Fatalf("call %d: Call(clock_now, {}) ran = %v, result %q (isError %v); want ran = %v", i+1, ran, res.Text(), res.IsError, wantRun)
				}
				if !ran && !strings.Contains(res.Text(), "loop guard") {
					t.Errorf("call %d: refused with %q, want the loop guard's notice", i+1, res.Text())
				}
			}
		})
	}
}
