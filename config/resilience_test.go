package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseResilienceErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{
			"out of range",
			yamlLines(
				"defaults:",
				"  retry: {on: [network, validation, flaky]}",
				"  retry_budget: -0.5",
				"  circuit_breaker: {failures: 0, failure_ratio: 1.5, min_calls: 0, window: 0s, open_for: -1s}",
				"  max_parallel: 4",
				"  max_parallel_per_session: 5",
				"  max_queue: -1",
				"upstreams:",
				"  - {name: u, transport: stdio, command: x, retry: {attempts: 11, on: [cancelled]}}",
			),
			[]string{
				`t.yaml:2:25: defaults.retry.on[1]: is never retried: the same call would fail the same way; remove it; got "validation"`,
				`t.yaml:2:37: defaults.retry.on[2]: must be one of network, timeout, unavailable, rate_limited, execution; got "flaky"`,
				`t.yaml:3:17: defaults.retry_budget: must be between 0 and 10, the fraction retries may add to a backend's calls, like 0.2 for 20%; got -0.5`,
				`t.yaml:4:31: defaults.circuit_breaker.failures: must be between 1 and 1000; set enabled: false to switch breakers off; got 0`,
				`t.yaml:4:49: defaults.circuit_breaker.failure_ratio: must be between 0 (off) and 1, like 0.5; got 1.5`,
				`t.yaml:4:65: defaults.circuit_breaker.min_calls: must be positive, like 20; got 0`,
				`t.yaml:4:76: defaults.circuit_breaker.window: must be positive, like 30s; got 0s`,
				`t.yaml:4:90: defaults.circuit_breaker.open_for: must be positive, like 30s; got -1s`,
				`t.yaml:6:29: defaults.max_parallel_per_session: must not exceed defaults.max_parallel (4); lower it or raise max_parallel; got 5`,
				`t.yaml:7:14: defaults.max_queue: must be between 0 (no waiting: a call finding no free slot fails at once) and 1000000; got -1`,
				`t.yaml:9:63: upstreams[0].retry.attempts: must be between 1 and 10 (1 means no retries); got 11`,
				`t.yaml:9:72: upstreams[0].retry.on[0]: is never retried: the same call would fail the same way; remove it; got "cancelled"`,
			},
		},
		{
			"a principal's share",
			yamlLines(
				"defaults:",
				"  max_parallel: 4",
				"  max_parallel_per_session: 4",
				"  max_parallel_per_principal: 5",
			),
			[]string{
				`t.yaml:4:31: defaults.max_parallel_per_principal: must not exceed defaults.max_parallel (4): it is one principal's share of it; lower it or raise max_parallel; got 5`,
			},
		},
		{
			"a negative share",
			yamlLines(
				"defaults:",
				"  max_parallel_per_principal: -1",
			),
			[]string{
				`t.yaml:2:31: defaults.max_parallel_per_principal: must be positive, like 32, or 0 for half of defaults.max_parallel; got -1`,
			},
		},
		{
			"a switched-off breaker is not checked; numbers must be numbers",
			yamlLines(
				"defaults:",
				"  retry_budget: lots",
				"  circuit_breaker: {enabled: false, failures: 0}",
			),
			[]string{
				`t.yaml:2:17: defaults.retry_budget: expected a number, got string "lots"`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", tc.in, &Options{LookupEnv: envOf(nil)})
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want errors", tc.in, cfg)
			}
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("Parse(%q) errors mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseUpstreamRetryInherits(t *testing.T) {
	cfg, err := Parse("t.yaml", yamlLines(
		"defaults: {retry: {attempts: 5, on: [network]}}",
		"upstreams:",
		"  - {name: a, transport: stdio, command: x, retry: {max_backoff: 1s}}",
		"  - {name: b, transport: stdio, command: x}",
	), &Options{LookupEnv: envOf(nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := &Retry{Attempts: 5, InitialBackoff: Duration(100 * time.Millisecond), MaxBackoff: Duration(time.Second), On: []string{"network"}}
	if diff := cmp.Diff(want, cfg.Upstreams[0].Retry); diff != "" {
		t.Errorf("upstreams[0].retry (-want +got):\n%s", diff)
	}
	if cfg.Upstreams[1].Retry != nil {
		t.Errorf("upstreams[1].retry = %+v, want nil (defaults.retry applies)", cfg.Upstreams[1].Retry)
	}
}
