package retry

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/retry/retrytest"
)

func TestBudget(t *testing.T) {
	// op is one move: advance the clock, record calls, then ask for tries
	// retries; granted is how many of them TryRetry grants.
	type op struct {
		advance time.Duration
		calls   int
		tries   int
		granted int
	}
	tests := []struct {
		name string
		cfg  BudgetConfig
		ops  []op
	}{
		{"floor for a quiet backend", BudgetConfig{}, []op{{tries: 15, granted: 10}}},
		{"ratio adds to the floor", BudgetConfig{}, []op{{calls: 100, tries: 50, granted: 30}}},
		{"each call earns a fifth", BudgetConfig{MinRetries: -1}, []op{{calls: 4, tries: 2, granted: 1}, {calls: 1, tries: 2, granted: 0}, {calls: 1, tries: 1, granted: 1}}},
		{"custom ratio", BudgetConfig{Ratio: 0.5, MinRetries: 2}, []op{{calls: 10, tries: 10, granted: 7}}},
		{"negative ratio leaves the floor", BudgetConfig{Ratio: -1}, []op{{calls: 1000, tries: 20, granted: 10}}},
		{"no floor, no calls, no retries", BudgetConfig{MinRetries: -1}, []op{{tries: 3, granted: 0}}},
		{"no ratio and no floor", BudgetConfig{Ratio: -1, MinRetries: -1}, []op{{calls: 100, tries: 3, granted: 0}}},
		{"retries expire with the window", BudgetConfig{}, []op{
			{tries: 10, granted: 10},
			{advance: 9 * time.Second, tries: 1, granted: 0},
			{advance: time.Second, tries: 11, granted: 10},
		}},
		{"calls expire with the window", BudgetConfig{MinRetries: -1}, []op{
			{calls: 50},
			{advance: 5 * time.Second, tries: 5, granted: 5},
			{advance: 5 * time.Second, tries: 5, granted: 0},
		}},
		{"custom window", BudgetConfig{Window: time.Minute, MinRetries: 1}, []op{
			{tries: 1, granted: 1},
			{advance: 50 * time.Second, tries: 1, granted: 0},
			{advance: 10 * time.Second, tries: 1, granted: 1},
		}},
		{"disabled grants everything", BudgetConfig{Disabled: true, MinRetries: -1, Ratio: -1}, []op{{tries: 1000, granted: 1000}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := retrytest.NewClock()
			b := NewBudget(tc.cfg, clock.Now)
			for i, o := range tc.ops {
				clock.Advance(o.advance)
				for range o.calls {
					b.Call()
				}
				granted := 0
				for range o.tries {
					if b.TryRetry() {
						granted++
					}
				}
				if granted != o.granted {
					t.Errorf("op %d: TryRetry granted %d of %d, want %d", i, granted, o.tries, o.granted)
				}
			}
		})
	}
}

func TestBudgetNil(t *testing.T) {
	var b *Budget
	b.Call()
	if !b.TryRetry() {
		t.Error("nil Budget refused a retry")
	}
}

func TestBudgetConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   BudgetConfig
		want BudgetConfig
	}{
		{"zero", BudgetConfig{}, BudgetConfig{Ratio: 0.2, MinRetries: 10, Window: 10 * time.Second}},
		{"negatives", BudgetConfig{Ratio: -1, MinRetries: -1, Window: -1}, BudgetConfig{Ratio: 0, MinRetries: 0, Window: 10 * time.Second}},
		{"set", BudgetConfig{Ratio: 3, MinRetries: 1, Window: time.Second}, BudgetConfig{Ratio: 3, MinRetries: 1, Window: time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NewBudget(tc.in, nil).Config()); diff != "" {
				t.Errorf("Config() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(BudgetConfig{MinRetries: 25, Ratio: -1}, retrytest.NewClock().Now)
	var granted atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			b.Call()
			if b.TryRetry() {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != 25 {
		t.Errorf("concurrent TryRetry granted %d, want 25", got)
	}
}
