package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseHooks(t *testing.T) {
	in := yamlLines(
		"hooks:",
		`  - {type: redact, patterns: ["ghp_[A-Za-z0-9]{36}"]}`,
		"  - {type: truncate, max_bytes: 20000}",
		`  - {type: deny_args, tools: ["fs__*"], rules: [{pointer: /path, pattern: "^/etc/", reason: no}]}`,
		"  - {type: webhook, url: 'http://127.0.0.1:9000/hook', principals: [alice]}",
		"  - {type: webhook, url: 'http://127.0.0.1:9000/hook', phase: both, timeout: 5s, on_error: allow}",
	)
	cfg, err := Parse("t.yaml", in, nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Hook{
		{Type: HookRedact, Patterns: []string{"ghp_[A-Za-z0-9]{36}"}},
		{Type: HookTruncate, MaxBytes: 20000},
		{Type: HookDenyArgs, Tools: []string{"fs__*"}, Rules: []DenyRule{{Pointer: "/path", Pattern: "^/etc/", Reason: "no"}}},
		{Type: HookWebhook, URL: "http://127.0.0.1:9000/hook", Principals: []string{"alice"}, Phase: PhaseBefore, Timeout: Duration(2 * time.Second), OnError: OnErrorDeny},
		{Type: HookWebhook, URL: "http://127.0.0.1:9000/hook", Phase: PhaseBoth, Timeout: Duration(5 * time.Second), OnError: OnErrorAllow},
	}
	if diff := cmp.Diff(want, cfg.Hooks); diff != "" {
		t.Errorf("Hooks mismatch (-want +got):\n%s", diff)
	}
}

func TestParseHookErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{
			"types",
			yamlLines(
				"hooks:",
				"  - {tools: [x]}",
				"  - {type: rewrite}",
			),
			[]string{
				`t.yaml:2:5: hooks[0].type: is required; write one of redact, truncate, deny_args, webhook`,
				`t.yaml:3:12: hooks[1].type: must be one of redact, truncate, deny_args, webhook; got "rewrite"`,
			},
		},
		{
			"required fields and ranges",
			yamlLines(
				"hooks:",
				"  - {type: redact, patterns: ['']}",
				"  - {type: truncate, max_bytes: 0}",
				"  - {type: deny_args, rules: [{pointer: /a}], tools: ['']}",
				"  - {type: webhook, phase: during, timeout: 2m, on_error: ignore}",
			),
			[]string{
				`t.yaml:2:31: hooks[0].patterns[0]: is empty; write a regular expression`,
				`t.yaml:3:33: hooks[1].max_bytes: must be between 1 and 1073741824, like 20000; got 0`,
				`t.yaml:4:31: hooks[2].rules[0].pattern: is required; write a regular expression, like ^/etc/`,
				`t.yaml:4:31: hooks[2].rules[0].reason: is required; say why the call is refused and what to do instead`,
				`t.yaml:4:55: hooks[2].tools[0]: is empty; write a tool name or a glob, like fs__*`,
				`t.yaml:5:5: hooks[3].url: is required for a webhook hook; write an http or https URL, like http://127.0.0.1:9000/hook`,
				`t.yaml:5:28: hooks[3].phase: must be one of before, after, both; got "during"`,
				`t.yaml:5:45: hooks[3].timeout: must be from 1ms to 1m, like 2s; leave it out for 2s; got 2m0s`,
				`t.yaml:5:59: hooks[3].on_error: must be allow or deny; got "ignore"`,
			},
		},
		{
			"fields of another type",
			yamlLines(
				"hooks:",
				"  - {type: truncate, max_bytes: 10, url: 'http://x', patterns: [a]}",
			),
			[]string{
				`t.yaml:2:42: hooks[0].url: does not apply to a truncate hook; remove it`,
				`t.yaml:2:64: hooks[0].patterns: does not apply to a truncate hook; remove it`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", tc.in, nil)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want errors %q", tc.in, cfg, tc.want)
			}
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("Parse(%q) errors mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
