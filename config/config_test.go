package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// builtinNames are the demonstration tools known to the tests.
var builtinNames = []string{"calc", "clock_now", "scratchpad", "sleep"}

// ignoreSecrets makes cmp skip Config's unexported fields (the recorded
// secrets); TestSecrets checks them through Config.Secrets.
var ignoreSecrets = cmpopts.IgnoreUnexported(Config{})

// yamlLines joins lines into a YAML document, so positions in a test case
// can be read off line by line.
func yamlLines(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n") + "\n")
}

// envOf returns a LookupEnv reading only m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// errLines splits err into its lines, checking on the way that it is a join
// of *PosError values, one per line.
func errLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(errs) {
		t.Errorf("error has %d lines but joins %d errors:\n%v", len(lines), len(errs), err)
	}
	for _, e := range errs {
		if _, ok := e.(*PosError); !ok {
			t.Errorf("joined error %v is %T, want *PosError", e, e)
		}
	}
	return lines
}

// want returns the defaults changed by mutate, named t.yaml.
func want(mutate func(*Config)) *Config {
	c := &Config{
		Server: Server{
			Listen:         "127.0.0.1:8080",
			MCPPath:        "/mcp",
			SSE:            true,
			Watch:          true,
			MaxBodyBytes:   4194304,
			ReadTimeout:    Duration(30 * time.Second),
			ShutdownGrace:  Duration(20 * time.Second),
			SessionIdleTTL: Duration(30 * time.Minute),
			MaxSessions:    10000,
		},
		Defaults: Defaults{
			Timeout:     Duration(30 * time.Second),
			Retry:       Retry{Attempts: 3, InitialBackoff: Duration(100 * time.Millisecond), MaxBackoff: Duration(5 * time.Second), On: []string{"network", "timeout", "unavailable", "rate_limited"}},
			RetryBudget: 0.2,
			CircuitBreaker: CircuitBreaker{Enabled: true, Failures: 5, FailureRatio: 0.5, MinCalls: 20,
				Window: Duration(30 * time.Second), OpenFor: Duration(30 * time.Second)},
			MaxParallel:           64,
			MaxParallelPerSession: 16,
			MaxQueue:              256,
		},
		Threads: Threads{IdleTTL: Duration(30 * time.Minute), MaxInstances: 1000},
		Guards:  Guards{NameRepair: true, Loop: LoopGuard{Threshold: 3, Action: LoopBlock}},
		Log:     Log{Level: "info", Format: "text"},
		Auth:    Auth{MaxSessions: 100},
		Source:  "t.yaml",
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		env  map[string]string
		want *Config
	}{
		{"empty file gives defaults", nil, nil, want(nil)},
		{"comments only give defaults", yamlLines("# nothing"), nil, want(nil)},
		{"empty sections keep defaults", yamlLines("server:", "threads: {}"), nil, want(nil)},
		{
			"explicit false is honoured",
			yamlLines("server:", "  sse: false", "guards:", "  name_repair: false"),
			nil,
			want(func(c *Config) { c.Server.SSE = false; c.Guards.NameRepair = false }),
		},
		{
			"loop guard",
			yamlLines("guards:", "  loop:", "    threshold: 5", "    action: ask", "    tools: {sleep: off, search: warn}"),
			nil,
			want(func(c *Config) {
				c.Guards.Loop = LoopGuard{Threshold: 5, Action: LoopAsk, Tools: map[string]LoopAction{"sleep": LoopOff, "search": LoopWarn}}
			}),
		},
		{
			"every key",
			yamlLines(
				"server:",
				"  listen: :0",
				"  mcp_path: /api/mcp",
				"  sse: false",
				"  max_body_bytes: 1024",
				"  read_timeout: 5s",
				"  shutdown_grace: 1m30s",
				"  session_idle_ttl: 2h",
				"  max_sessions: 3",
				"  watch: false",
				"  allowed_origins: [https://app.example.com, 'http://localhost:5173']",
				"defaults:",
				"  timeout: 500ms",
				"  retry: {attempts: 4, on: [network, execution]}",
				"  retry_budget: 0.5",
				"  circuit_breaker: {enabled: true, failures: 3, failure_ratio: 0, min_calls: 5, window: 1m, open_for: 10s}",
				"  max_parallel: 8",
				"  max_parallel_per_session: 2",
				"  max_queue: 0",
				"batch_tool: true",
				"threads:",
				"  idle_ttl: 10m",
				"  max_instances: 1",
				"guards:",
				"  name_repair: false",
				"log:",
				"  level: debug",
				"  format: json",
				"builtin:",
				"  - calc",
				"  - sleep",
			),
			nil,
			&Config{
				Server: Server{
					Listen: ":0", MCPPath: "/api/mcp", SSE: false, MaxBodyBytes: 1024, ReadTimeout: Duration(5 * time.Second),
					ShutdownGrace: Duration(90 * time.Second), SessionIdleTTL: Duration(2 * time.Hour), MaxSessions: 3,
					AllowedOrigins: []string{"https://app.example.com", "http://localhost:5173"},
				},
				Defaults: Defaults{
					Timeout:     Duration(500 * time.Millisecond),
					Retry:       Retry{Attempts: 4, InitialBackoff: Duration(100 * time.Millisecond), MaxBackoff: Duration(5 * time.Second), On: []string{"network", "execution"}},
					RetryBudget: 0.5,
					CircuitBreaker: CircuitBreaker{Enabled: true, Failures: 3, FailureRatio: 0, MinCalls: 5,
						Window: Duration(time.Minute), OpenFor: Duration(10 * time.Second)},
					MaxParallel:           8,
					MaxParallelPerSession: 2,
					MaxQueue:              0,
				},
				BatchTool: true,
				Threads:   Threads{IdleTTL: Duration(10 * time.Minute), MaxInstances: 1},
				Guards:    Guards{NameRepair: false, Loop: LoopGuard{Threshold: 3, Action: LoopBlock}},
				Log:       Log{Level: "debug", Format: "json"},
				Builtin:   []string{"calc", "sleep"},
				Auth:      Auth{MaxSessions: 100},
				Source:    "t.yaml",
			},
		},
		{"null list is empty", yamlLines("builtin:"), nil, want(nil)},
		{"empty list is empty", yamlLines("builtin: []"), nil, want(nil)},
		{
			"anchor and alias",
			yamlLines("defaults:", "  timeout: &t 45s", "threads:", "  idle_ttl: *t"),
			nil,
			want(func(c *Config) {
				c.Defaults.Timeout = Duration(45 * time.Second)
				c.Threads.IdleTTL = Duration(45 * time.Second)
			}),
		},
		{"!!str tag", yamlLines("log:", "  level: !!str debug"), nil, want(func(c *Config) { c.Log.Level = "debug" })},
		{"document header", yamlLines("---", "log: {level: warn}"), nil, want(func(c *Config) { c.Log.Level = "warn" })},
		{
			"env set",
			yamlLines("server:", "  listen: ${ADDR}"),
			map[string]string{"ADDR": "0.0.0.0:9000"},
			want(func(c *Config) { c.Server.Listen = "0.0.0.0:9000" }),
		},
		{
			"env default when unset",
			yamlLines("server:", "  listen: ${ADDR:-127.0.0.1:9}"),
			nil,
			want(func(c *Config) { c.Server.Listen = "127.0.0.1:9" }),
		},
		{
			"env default when empty",
			yamlLines("server:", "  listen: ${ADDR:-127.0.0.1:9}"),
			map[string]string{"ADDR": ""},
			want(func(c *Config) { c.Server.Listen = "127.0.0.1:9" }),
		},
		{
			"env inside a longer value",
			yamlLines("server:", "  listen: ${HOST:-localhost}:${PORT}"),
			map[string]string{"PORT": "7000"},
			want(func(c *Config) { c.Server.Listen = "localhost:7000" }),
		},
		{
			"dollar escape",
			yamlLines("server:", "  mcp_path: /$$x/$${NOT}"),
			nil,
			want(func(c *Config) { c.Server.MCPPath = "/$x/${NOT}" }),
		},
		{
			"env converts by target type",
			yamlLines(
				"server:",
				"  sse: ${SSE:-true}",
				"  max_body_bytes: ${BODY}",
				"  shutdown_grace: ${GRACE:-5s}",
				"threads:",
				"  max_instances: ${MAX:-1000}",
				`builtin: ["${B1}", "${B2:-sleep}"]`,
			),
			map[string]string{"SSE": "false", "BODY": "2048", "B1": "calc"},
			want(func(c *Config) {
				c.Server.SSE = false
				c.Server.MaxBodyBytes = 2048
				c.Server.ShutdownGrace = Duration(5 * time.Second)
				c.Threads.MaxInstances = 1000
				c.Builtin = []string{"calc", "sleep"}
			}),
		},
		{
			"env in a literal block",
			yamlLines("log:", "  level: |-", "    ${LEVEL}"),
			map[string]string{"LEVEL": "error"},
			want(func(c *Config) { c.Log.Level = "error" }),
		},
		{
			"env value is not expanded again",
			yamlLines("server:", "  mcp_path: ${P}"),
			map[string]string{"P": "/${X}"},
			want(func(c *Config) { c.Server.MCPPath = "/${X}" }),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("t.yaml", tc.in, &Options{LookupEnv: envOf(tc.env), Builtins: builtinNames})
			if err != nil {
				t.Fatalf("Parse(%q) error:\n%v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreSecrets); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		env  map[string]string
		want []string
	}{
		{
			"unknown key",
			yamlLines("server:", "  listen: 127.0.0.1:1", "  listn: x"),
			nil,
			[]string{"t.yaml:3:3: server.listn: unknown key; valid keys: listen, mcp_path, sse, max_body_bytes, read_timeout, shutdown_grace, session_idle_ttl, max_sessions, watch, allowed_origins"},
		},
		{
			"unknown top-level key",
			yamlLines("builtins: [calc]"),
			nil,
			[]string{"t.yaml:1:1: builtins: unknown key; valid keys: server, defaults, threads, guards, log, builtin, rest, openapi, upstreams, batch_tool, hooks, auth, cluster, token_store, audit, telemetry, endpoints, catalog"},
		},
		{
			"odd key is quoted in the path",
			yamlLines(`log: {"a b": 1}`),
			nil,
			[]string{`t.yaml:1:7: log."a b": unknown key; valid keys: level, format`},
		},
		{
			"duplicate key",
			yamlLines("log:", "  level: info", "  level: debug"),
			nil,
			[]string{`t.yaml:3:3: invalid YAML: mapping key "level" already defined at [2:3]`},
		},
		{
			"integer expected",
			yamlLines("threads:", "  max_instances: lots"),
			nil,
			[]string{`t.yaml:2:18: threads.max_instances: expected an integer, got string "lots"`},
		},
		{
			"integer expected, got a float",
			yamlLines("threads:", "  max_instances: 1.5"),
			nil,
			[]string{`t.yaml:2:18: threads.max_instances: expected an integer, got number 1.5`},
		},
		{
			"integer expected, got a quoted number",
			yamlLines("threads:", `  max_instances: "5"`),
			nil,
			[]string{`t.yaml:2:18: threads.max_instances: expected an integer, got string "5"`},
		},
		{
			"integer out of range",
			yamlLines("threads:", "  max_instances: 99999999999999999999"),
			nil,
			[]string{`t.yaml:2:18: threads.max_instances: integer 99999999999999999999 is out of range`},
		},
		{
			"boolean expected",
			yamlLines("server:", "  sse: yes"),
			nil,
			[]string{`t.yaml:2:8: server.sse: expected true or false, got string "yes"`},
		},
		{
			"string expected, got a list",
			yamlLines("server:", "  listen: [a]"),
			nil,
			[]string{`t.yaml:2:11: server.listen: expected a string, got a list`},
		},
		{
			"no value for a scalar",
			yamlLines("server:", "  listen:"),
			nil,
			[]string{`t.yaml:2:3: server.listen: expected a string, got no value; write one or delete the key`},
		},
		{
			"list expected",
			yamlLines("builtin: calc"),
			nil,
			[]string{`t.yaml:1:10: builtin: expected a list, got string "calc"`},
		},
		{
			"section expected",
			yamlLines("log: [debug]"),
			nil,
			[]string{`t.yaml:1:6: log: expected a mapping with keys level, format, got a list`},
		},
		{
			"root must be a mapping",
			yamlLines("- calc"),
			nil,
			[]string{`t.yaml:1:1: expected a mapping with keys server, defaults, threads, guards, log, builtin, rest, openapi, upstreams, batch_tool, hooks, auth, cluster, token_store, audit, telemetry, endpoints, catalog, got a list`},
		},
		{
			"duration without a unit",
			yamlLines("defaults:", "  timeout: 30"),
			nil,
			[]string{`t.yaml:2:12: defaults.timeout: expected a duration, got integer 30; write a duration with a unit, like 30s`},
		},
		{
			"duration that does not parse",
			yamlLines("defaults:", `  timeout: "30"`),
			nil,
			[]string{`t.yaml:2:12: defaults.timeout: expected a duration, got string "30"; write a duration with a unit, like 30s`},
		},
		{
			"duration with no value",
			yamlLines("defaults:", "  timeout: ~"),
			nil,
			[]string{`t.yaml:2:12: defaults.timeout: expected a duration like 30s, got no value; write one or delete the key`},
		},
		{
			"negative and zero durations",
			yamlLines("server:", "  shutdown_grace: -5s", "threads:", "  idle_ttl: 0s"),
			nil,
			[]string{
				`t.yaml:2:19: server.shutdown_grace: must be positive, like 30s; got -5s`,
				`t.yaml:4:13: threads.idle_ttl: must be positive, like 30s; got 0s`,
			},
		},
		{
			"zero read_timeout",
			yamlLines("server:", "  read_timeout: 0s"),
			nil,
			[]string{`t.yaml:2:17: server.read_timeout: must be positive, like 30s; got 0s`},
		},
		{
			"syntax error",
			yamlLines("server:", "  allowed_origins: [a, b"),
			nil,
			[]string{`t.yaml:2:20: invalid YAML: sequence end token ']' not found`},
		},
		{
			"two documents",
			yamlLines("log: {level: info}", "---", "log: {level: debug}"),
			nil,
			[]string{`t.yaml:2:1: a config file holds one YAML document; remove this one and everything after it`},
		},
		{
			"unknown alias",
			yamlLines("defaults:", "  timeout: *t"),
			nil,
			[]string{`t.yaml:2:12: defaults.timeout: unknown alias *t; define it earlier with &t`},
		},
		{
			"merge key",
			yamlLines("log:", "  <<: {level: info}"),
			nil,
			[]string{`t.yaml:2:3: log: merge keys (<<) are not supported; write the keys out`},
		},
		{
			"unsupported tag",
			yamlLines("threads:", "  max_instances: !!float 3"),
			nil,
			[]string{`t.yaml:2:18: threads.max_instances: unsupported tag !!float; remove it`},
		},
		{
			"listen is not host:port",
			yamlLines("server:", "  listen: 8080"),
			nil,
			[]string{`t.yaml:2:11: server.listen: must be host:port with a numeric port, like 127.0.0.1:8080 or :8080; got "8080"`},
		},
		{
			"listen port is a name",
			yamlLines("server:", "  listen: localhost:http"),
			nil,
			[]string{`t.yaml:2:11: server.listen: must be host:port with a numeric port, like 127.0.0.1:8080 or :8080; got "localhost:http"`},
		},
		{
			"a number where a string is expected reads as its text",
			yamlLines("log:", "  level: 123"),
			nil,
			[]string{`t.yaml:2:10: log.level: must be one of debug, info, warn, error; got "123"`},
		},
		{
			"mcp_path without a slash",
			yamlLines("server:", "  mcp_path: mcp"),
			nil,
			[]string{`t.yaml:2:13: server.mcp_path: must start with "/", like /mcp; got "mcp"`},
		},
		{
			"mcp_path reserved",
			yamlLines("server:", "  mcp_path: /metrics"),
			nil,
			[]string{`t.yaml:2:13: server.mcp_path: is reserved for Prometheus metrics; pick another path, like /mcp; got "/metrics"`},
		},
		{
			"max_body_bytes too small",
			yamlLines("server:", "  max_body_bytes: 1023"),
			nil,
			[]string{`t.yaml:2:19: server.max_body_bytes: must be between 1024 and 1073741824 (1 GiB); got 1023`},
		},
		{
			"max_sessions zero",
			yamlLines("server:", "  max_sessions: 0"),
			nil,
			[]string{`t.yaml:2:17: server.max_sessions: must be at least 1, like 10000; got 0`},
		},
		{
			"max_body_bytes too large",
			yamlLines("server:", "  max_body_bytes: 1073741825"),
			nil,
			[]string{`t.yaml:2:19: server.max_body_bytes: must be between 1024 and 1073741824 (1 GiB); got 1073741825`},
		},
		{
			"loop guard values",
			yamlLines("guards:", "  loop:", "    threshold: 0", "    action: stop", "    tools:", "      sleep: never", "      calc: warn"),
			nil,
			[]string{
				`t.yaml:3:16: guards.loop.threshold: must be at least 1, like 3; got 0`,
				`t.yaml:4:13: guards.loop.action: must be one of block, warn, ask, off; got "stop"`,
				`t.yaml:6:14: guards.loop.tools.sleep: must be one of block, warn, ask, off; got "never"`,
			},
		},
		{
			"loop guard threshold negative",
			yamlLines("guards:", "  loop: {threshold: -2}"),
			nil,
			[]string{`t.yaml:2:21: guards.loop.threshold: must be at least 1, like 3; got -2`},
		},
		{
			"max_bytes_per_principal too small",
			yamlLines("threads:", "  max_bytes_per_principal: 4096"),
			nil,
			[]string{`t.yaml:2:28: threads.max_bytes_per_principal: must be at least 1048576 (1 MiB), like 67108864 (64 MiB), or 0 for 64 MiB; got 4096`},
		},
		{
			"max_instances zero",
			yamlLines("threads:", "  max_instances: 0"),
			nil,
			[]string{`t.yaml:2:18: threads.max_instances: must be at least 1; got 0`},
		},
		{
			"allowed_origins",
			yamlLines(
				"server:",
				"  allowed_origins:",
				"    - https://ok.example.com:8443",
				"    - https://app.example.com/",
				"    - app.example.com",
				"    - https://u:p@x.example.com",
				"    - http://x.example.com:99999",
			),
			nil,
			[]string{
				`t.yaml:4:7: server.allowed_origins[1]: must be scheme://host[:port] with no path, like https://app.example.com; got "https://app.example.com/"`,
				`t.yaml:5:7: server.allowed_origins[2]: must be scheme://host[:port] with no path, like https://app.example.com; got "app.example.com"`,
				`t.yaml:6:7: server.allowed_origins[3]: must be scheme://host[:port] with no path, like https://app.example.com; got "https://u:p@x.example.com"`,
				`t.yaml:7:7: server.allowed_origins[4]: must be scheme://host[:port] with no path, like https://app.example.com; got "http://x.example.com:99999"`,
			},
		},
		{
			"log level and format",
			yamlLines("log:", "  level: verbose", "  format: xml"),
			nil,
			[]string{
				`t.yaml:2:10: log.level: must be one of debug, info, warn, error; got "verbose"`,
				`t.yaml:3:11: log.format: must be text or json; got "xml"`,
			},
		},
		{
			"builtin duplicate and unknown",
			yamlLines("builtin: [calc, clock, calc]"),
			nil,
			[]string{
				`t.yaml:1:17: builtin[1]: unknown builtin; valid names: calc, clock_now, scratchpad, sleep; got "clock"`,
				`t.yaml:1:24: builtin[2]: duplicate entry, already listed as builtin[0]; remove one; got "calc"`,
			},
		},
		{
			"env unset",
			yamlLines("server:", "  listen: ${LISTEN_ADDR}"),
			nil,
			[]string{`t.yaml:2:11: server.listen: environment variable LISTEN_ADDR is not set; set it or write ${LISTEN_ADDR:-value}`},
		},
		{
			"env lone dollar",
			yamlLines("server:", "  mcp_path: /a$b"),
			nil,
			[]string{`t.yaml:2:13: server.mcp_path: a "$" must start ${NAME} or ${NAME:-default}; write $$ for a literal $`},
		},
		{
			"env unterminated",
			yamlLines("server:", "  listen: ${ADDR"),
			nil,
			[]string{`t.yaml:2:11: server.listen: unterminated "${"; close it with "}", like ${NAME}`},
		},
		{
			"env invalid name",
			yamlLines("server:", "  listen: ${1ADDR-x}"),
			nil,
			[]string{`t.yaml:2:11: server.listen: invalid variable reference ${1ADDR-x}; write ${NAME} or ${NAME:-default}, where NAME is letters, digits and _`},
		},
		{
			"env type errors never show the value",
			yamlLines(
				"server:",
				"  sse: ${SSE}",
				"threads:",
				"  max_instances: ${MAX}",
				"  idle_ttl: ${TTL}",
				"log: ${LOG}",
			),
			map[string]string{"SSE": "maybe", "MAX": "lots", "TTL": "4545", "LOG": "xx-log"},
			[]string{
				`t.yaml:2:8: server.sse: expected true or false (value came from ${SSE})`,
				`t.yaml:4:18: threads.max_instances: expected an integer (value came from ${MAX})`,
				`t.yaml:5:13: threads.idle_ttl: expected a duration (value came from ${TTL}); write a duration with a unit, like 30s`,
				`t.yaml:6:6: log: expected a mapping with keys level, format (value came from ${LOG})`,
			},
		},
		{
			"env validation errors never show the value",
			yamlLines("threads:", "  max_instances: ${MAX:-1000}"),
			map[string]string{"MAX": "0"},
			[]string{`t.yaml:2:18: threads.max_instances: must be at least 1 (value came from ${MAX:-1000})`},
		},
		{
			"every problem at once, in file order",
			yamlLines(
				"log:",
				"  format: xml",
				"server:",
				"  listn: x",
				"  sse: 1",
				"builtin: [nope]",
			),
			nil,
			[]string{
				`t.yaml:2:11: log.format: must be text or json; got "xml"`,
				`t.yaml:4:3: server.listn: unknown key; valid keys: listen, mcp_path, sse, max_body_bytes, read_timeout, shutdown_grace, session_idle_ttl, max_sessions, watch, allowed_origins`,
				`t.yaml:5:8: server.sse: expected true or false, got integer 1`,
				`t.yaml:6:11: builtin[0]: unknown builtin; valid names: calc, clock_now, scratchpad, sleep; got "nope"`,
			},
		},
		{
			"columns count characters, not bytes",
			yamlLines(`log: {"é": 1, level: x}`),
			nil,
			[]string{
				`t.yaml:1:7: log."é": unknown key; valid keys: level, format`,
				`t.yaml:1:22: log.level: must be one of debug, info, warn, error; got "x"`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", tc.in, &Options{LookupEnv: envOf(tc.env), Builtins: builtinNames})
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want errors %q", tc.in, cfg, tc.want)
			}
			if cfg != nil {
				t.Errorf("Parse(%q) returned a config with its error", tc.in)
			}
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("Parse(%q) errors mismatch (-want +got):\n%s", tc.in, diff)
			}
			for k, v := range tc.env {
				if len(v) > 1 && strings.Contains(err.Error(), v) {
					t.Errorf("error shows the value of %s:\n%v", k, err)
				}
			}
		})
	}
}

// TestSecretNeverInError puts a secret-looking value into every key and
// checks that no error shows it, while every error says where it came from.
func TestSecretNeverInError(t *testing.T) {
	const secret = "sk-live-Sup3rS3cret"
	in := yamlLines(
		"server:",
		"  listen: ${S}",
		"  mcp_path: ${S}",
		"  sse: ${S}",
		"  max_body_bytes: ${S}",
		"  shutdown_grace: ${S}",
		"  session_idle_ttl: ${S}",
		`  allowed_origins: ["${S}"]`,
		"defaults: ${S}",
		"threads:",
		"  idle_ttl: ${S}",
		"  max_instances: ${S}",
		"guards:",
		"  name_repair: ${S}",
		"log:",
		"  level: ${S}",
		"  format: ${S}",
		`builtin: ["${S}", "x${S}", "x${S}"]`,
	)
	_, err := Parse("t.yaml", in, &Options{LookupEnv: envOf(map[string]string{"S": secret}), Builtins: builtinNames})
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	lines := errLines(t, err)
	if len(lines) != 16 {
		t.Errorf("got %d errors, want 16 (one per value):\n%v", len(lines), err)
	}
	for _, l := range lines {
		if strings.Contains(l, "Sup3r") || strings.Contains(l, "sk-live") {
			t.Errorf("error shows the secret: %s", l)
		}
		if !strings.Contains(l, "(value came from ") {
			t.Errorf("error does not say the value came from the environment: %s", l)
		}
	}
}

func TestExpand(t *testing.T) {
	env := envOf(map[string]string{"A": "1", "EMPTY": ""})
	tests := []struct {
		in          string
		want        string
		wantFromEnv bool
		wantErr     bool
	}{
		{"plain", "plain", false, false},
		{"${A}", "1", true, false},
		{"x${A}y${A}", "x1y1", true, false},
		{"${EMPTY}", "", true, false},
		{"${EMPTY:-d}", "d", true, false},
		{"${UNSET:-}", "", true, false},
		{"${UNSET:-a:-b}", "a:-b", true, false},
		{"$$", "$", false, false},
		{"$${A}", "${A}", false, false},
		{"$$$${A}", "$${A}", false, false},
		{"$$${A}", "$1", true, false},
		{"${UNSET}", "", false, true},
		{"$", "", false, true},
		{"a$b", "", false, true},
		{"${", "", false, true},
		{"${}", "", false, true},
		{"${A B}", "", false, true},
		{"${UNSET:-${A}}", "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, fromEnv, err := expand(tc.in, env)
			if (err != nil) != tc.wantErr {
				t.Fatalf("expand(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want || fromEnv != tc.wantFromEnv {
				t.Errorf("expand(%q) = %q, %v, want %q, %v", tc.in, got, fromEnv, tc.want, tc.wantFromEnv)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name string
		opts *Options
	}{
		{"nil options", nil},
		{"known builtins", &Options{Builtins: builtinNames}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Default(tc.opts)
			if err != nil {
				t.Fatalf("Default() error:\n%v", err)
			}
			w := want(func(c *Config) {
				c.Builtin = []string{"calc", "clock_now", "scratchpad", "sleep"}
				c.Source = EmbeddedSource
			})
			if diff := cmp.Diff(w, got, ignoreSecrets); diff != "" {
				t.Errorf("Default() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Default(&Options{Builtins: []string{"calc"}}); err == nil ||
		!strings.HasPrefix(err.Error(), EmbeddedSource+":") {
		t.Errorf("Default() with unknown builtins error = %v, want one positioned in %s", err, EmbeddedSource)
	}
}

// TestGoccyAgrees decodes the embedded default with goccy/go-yaml's own
// strict decoder too: the yaml tags and Duration.UnmarshalYAML must read
// the file the way Parse does.
func TestGoccyAgrees(t *testing.T) {
	ours, err := Default(nil)
	if err != nil {
		t.Fatal(err)
	}
	theirs := defaults()
	if err := yaml.UnmarshalWithOptions(defaultYAML, &theirs, yaml.Strict()); err != nil {
		t.Fatalf("goccy strict decode: %v", err)
	}
	theirs.Source = EmbeddedSource
	if diff := cmp.Diff(ours, &theirs, ignoreSecrets); diff != "" {
		t.Errorf("Parse and goccy disagree (-Parse +goccy):\n%s", diff)
	}
}

// exampleREST sets the rest section config.example.yaml gives with no
// environment. Its openapi section is a commented-out block (a spec file
// path would break in a copy of the file elsewhere), checked by
// TestExampleDocumentsEveryKey.
func exampleREST(c *Config) {
	c.Defaults.Catalog = CatalogTools
	c.Catalog = GatewayCatalog{Mode: CatalogTools}
	c.Rest = []RESTTool{
		{
			Name:        "get_weather",
			Description: "Current weather for a city.",
			Method:      "GET",
			URL:         "http://127.0.0.1:9000/weather/{city}",
			Query:       map[string]string{"units": "{units}", "lang": "en"},
			Headers:     map[string]string{"Accept": "application/json", "Authorization": "Bearer dev-token"},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"City name, like Paris"},` +
				`"units":{"type":"string","enum":["metric","imperial"]}},"required":["city"],"additionalProperties":false}`),
			Idempotent:       new(true),
			Timeout:          Duration(10 * time.Second),
			Retry:            &Retry{Attempts: 4, InitialBackoff: Duration(200 * time.Millisecond), MaxBackoff: Duration(2 * time.Second), On: defaultRetryOn},
			MaxResponseBytes: 262144,
			AllowedHosts:     []string{"127.0.0.1:9000"},
			Cache:            &Cache{TTL: Duration(30 * time.Second), MaxBytes: 1 << 20},
		},
		{
			Name:        "create_ticket",
			Description: "Open a support ticket; returns its ID.",
			Method:      "POST",
			URL:         "http://127.0.0.1:9000/tickets",
			Headers:     map[string]string{"X-Api-Key": "example-key"},
			Body:        json.RawMessage(`{"title":"{title}","priority":"{priority}","source":"toolgate","tags":["mcp"]}`),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},` +
				`"priority":{"type":"integer","minimum":1,"maximum":5}},"required":["title"]}`),
			Idempotent:       new(true),
			MaxResponseBytes: 1 << 20,
		},
	}
}

func TestExampleFile(t *testing.T) {
	const path = "../config.example.yaml"
	tests := []struct {
		name        string
		env         map[string]string
		want        *Config
		wantSecrets []string
	}{
		{"no environment", nil, want(func(c *Config) {
			c.Builtin = []string{"calc", "clock_now", "scratchpad", "sleep"}
			c.Guards.Loop.Tools = map[string]LoopAction{"sleep": LoopOff}
			exampleREST(c)
			c.Source = path
		}), nil},
		{"TOOLGATE_LISTEN set", map[string]string{"TOOLGATE_LISTEN": "0.0.0.0:9000"}, want(func(c *Config) {
			c.Server.Listen = "0.0.0.0:9000"
			c.Builtin = []string{"calc", "clock_now", "scratchpad", "sleep"}
			c.Guards.Loop.Tools = map[string]LoopAction{"sleep": LoopOff}
			exampleREST(c)
			c.Source = path
		}), []string{"0.0.0.0:9000"}},
		{"tokens set", map[string]string{"WEATHER_TOKEN": "w-tok", "TICKETS_KEY": "t-key"}, want(func(c *Config) {
			c.Builtin = []string{"calc", "clock_now", "scratchpad", "sleep"}
			c.Guards.Loop.Tools = map[string]LoopAction{"sleep": LoopOff}
			exampleREST(c)
			c.Rest[0].Headers["Authorization"] = "Bearer w-tok"
			c.Rest[1].Headers["X-Api-Key"] = "t-key"
			c.Source = path
		}), []string{"w-tok", "t-key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(path, &Options{LookupEnv: envOf(tc.env), Builtins: builtinNames})
			if err != nil {
				t.Fatalf("Load(%s) error:\n%v", path, err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreSecrets); diff != "" {
				t.Errorf("Load(%s) mismatch (-want +got):\n%s", path, diff)
			}
			if diff := cmp.Diff(tc.wantSecrets, got.Secrets()); diff != "" {
				t.Errorf("Load(%s).Secrets() mismatch (-want +got):\n%s", path, diff)
			}
		})
	}
}

// TestExampleDocumentsEveryKey checks that config.example.yaml sets every
// key the structs have, so a new field cannot go undocumented.
func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder("example", envOf(nil))
	cfg := defaults()
	if err := decodeForTest(d, data, &cfg); err != nil {
		t.Fatal(err)
	}
	paths := keyPaths("", reflect.TypeFor[Config]())
	if len(paths) < 50 {
		t.Fatalf("keyPaths found only %d keys: %v", len(paths), paths)
	}
	// A key inside a list counts as set if any element sets it.
	set := map[string]bool{}
	for path := range d.at {
		set[listIndex.ReplaceAllString(path, "[]")] = true
	}
	// The commented-out upstreams block documents its keys too; it must
	// load and validate once uncommented (TestExampleUpstreams checks what
	// it loads to).
	// So do the commented-out openapi, hooks, auth, cluster, audit and telemetry blocks.
	env := envOf(map[string]string{"TOOLGATE_CLUSTER_SECRET": strings.Repeat("s", 48)})
	for _, name := range []string{"openapi", "upstreams", "hooks", "auth", "cluster", "audit", "telemetry", "endpoints"} {
		block := commentedBlock(t, string(data), "# BEGIN "+name+" example", "# END "+name+" example")
		if _, err := Parse("example-"+name, []byte(block), &Options{LookupEnv: env}); err != nil {
			t.Errorf("the commented %s example does not load once uncommented:\n%v", name, err)
		}
		db := newDecoder("example-"+name, env)
		cfgB := defaults()
		if err := decodeForTest(db, []byte(block), &cfgB); err != nil {
			t.Fatal(err)
		}
		for path := range db.at {
			set[listIndex.ReplaceAllString(path, "[]")] = true
		}
	}
	for _, path := range paths {
		if !set[path] {
			t.Errorf("config.example.yaml does not set %s", path)
		}
	}
}

// commentedBlock returns the lines between the begin and end markers of
// data with their leading "# " (or "#") removed. Every line of the block
// must be a comment: the block is an example that must stay switched off.
func commentedBlock(t *testing.T, data, begin, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(data, begin+"\n")
	body, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("config.example.yaml lacks the %q … %q block", begin, end)
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("config.example.yaml: a line between %q and %q is not commented out: %q", begin, end, line)
		}
		line = strings.TrimPrefix(line, "#")
		b.WriteString(strings.TrimPrefix(line, " "))
	}
	return b.String()
}

// listIndex matches the index in a key path such as rest[1].name.
var listIndex = regexp.MustCompile(`\[\d+\]`)

// decodeForTest parses data and decodes it into v with d, without
// validating.
func decodeForTest(d *decoder, data []byte, v any) error {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return err
	}
	if len(f.Docs) > 0 && f.Docs[0].Body != nil {
		d.decode("", f.Docs[0].Body, nodePos(f.Docs[0].Body), reflect.ValueOf(v).Elem(), 0)
	}
	return joinSorted(d.errs)
}

// keyPaths lists the dotted path of every key in struct type t, going into
// sections, optional sections (*Retry) and lists of sections, whose
// elements are written path[].
func keyPaths(prefix string, t reflect.Type) []string {
	var out []string
	for _, f := range structFields(t) {
		path := childPath(prefix, f.name)
		out = append(out, path)
		ft := t.Field(f.index).Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			path += "[]"
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !isDuration(ft) {
			out = append(out, keyPaths(path, ft)...)
		}
	}
	return out
}

func TestResolve(t *testing.T) {
	const fileYAML = "log:\n  level: debug\n"
	tests := []struct {
		name      string
		file      bool // write ./toolgate.yaml
		path      string
		wantLevel string
		wantSrc   string
	}{
		{"no file: embedded default", false, "", "info", EmbeddedSource},
		{"./toolgate.yaml", true, "", "debug", "toolgate.yaml"},
		{"explicit path wins", true, "other.yaml", "warn", "other.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if tc.file {
				if err := os.WriteFile("toolgate.yaml", []byte(fileYAML), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile("other.yaml", []byte("log: {level: warn}\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Resolve(tc.path, nil)
			if err != nil {
				t.Fatalf("Resolve(%q) error: %v", tc.path, err)
			}
			if got.Log.Level != tc.wantLevel || got.Source != tc.wantSrc {
				t.Errorf("Resolve(%q) = level %q from %q, want %q from %q", tc.path, got.Log.Level, got.Source, tc.wantLevel, tc.wantSrc)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("log:\n  levle: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("missing file names the path", func(t *testing.T) {
		_, err := Load(missing, nil)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
			t.Errorf("Load(%s) error = %v, want fs.ErrNotExist naming the path", missing, err)
		}
	})
	t.Run("resolve with a missing explicit path", func(t *testing.T) {
		t.Chdir(dir)
		if _, err := Resolve("missing.yaml", nil); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Resolve(missing.yaml) error = %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("positions use the path", func(t *testing.T) {
		_, err := Load(bad, nil)
		pe, ok := errors.AsType[*PosError](err)
		if !ok {
			t.Fatalf("Load(%s) error = %v, want a *PosError", bad, err)
		}
		w := &PosError{File: bad, Line: 2, Col: 3, Path: "log.levle", Msg: "unknown key; valid keys: level, format"}
		if diff := cmp.Diff(w, pe); diff != "" {
			t.Errorf("Load(%s) error mismatch (-want +got):\n%s", bad, diff)
		}
	})
}

// TestLocate checks that a path with no position of its own falls back to
// its section's key, then to the top of the file.
func TestLocate(t *testing.T) {
	d := newDecoder("t.yaml", envOf(nil))
	cfg := defaults()
	if err := decodeForTest(d, yamlLines("log:", "  level: debug", "server:", "  sse: false"), &cfg); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want pos
	}{
		{"server.sse", pos{4, 8}},
		{"server.listen", pos{3, 1}},
		{"server.allowed_origins[3]", pos{3, 1}},
		{"log.level", pos{2, 10}},
		{"threads.idle_ttl", pos{1, 1}},
		{"builtin[0]", pos{1, 1}},
	}
	for _, tc := range tests {
		if got := d.locate(tc.path); got != tc.want {
			t.Errorf("locate(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func TestValidateGoConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"defaults are valid", nil, nil},
		{"errors have no position", func(c *Config) {
			c.Log.Level = "loud"
			c.Threads.MaxInstances = -1
		}, []string{
			`mem: threads.max_instances: must be at least 1; got -1`,
			`mem: log.level: must be one of debug, info, warn, error; got "loud"`,
		}},
		{"loop guard is checked", func(c *Config) {
			c.Guards.Loop = LoopGuard{Tools: map[string]LoopAction{"": LoopOff}}
		}, []string{
			`mem: guards.loop.threshold: must be at least 1, like 3; got 0`,
			`mem: guards.loop.action: must be one of block, warn, ask, off; got ""`,
			`mem: guards.loop.tools."": needs a tool name as its key`,
		}},
		{"builtins are checked", func(c *Config) { c.Builtin = []string{"calc", "rm"} }, []string{
			`mem: builtin[1]: unknown builtin; valid names: calc, clock_now, scratchpad, sleep; got "rm"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := want(tc.mutate)
			c.Source = "mem"
			err := c.Validate(&Options{Builtins: builtinNames})
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPosErrorString(t *testing.T) {
	tests := []struct {
		e    PosError
		want string
	}{
		{PosError{File: "f.yaml", Line: 3, Col: 4, Path: "a.b", Msg: "bad"}, "f.yaml:3:4: a.b: bad"},
		{PosError{File: "f.yaml", Line: 1, Col: 1, Msg: "invalid YAML: x"}, "f.yaml:1:1: invalid YAML: x"},
		{PosError{File: "f.yaml", Path: "a", Msg: "bad"}, "f.yaml: a: bad"},
		{PosError{Path: "a", Msg: "bad"}, "a: bad"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%#v.Error() = %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	type doc struct {
		D Duration `yaml:"d"`
	}
	tests := []struct {
		in      string
		want    Duration
		wantErr bool
	}{
		{"d: 30s", Duration(30 * time.Second), false},
		{"d: 1m30s", Duration(90 * time.Second), false},
		{`d: "250ms"`, Duration(250 * time.Millisecond), false},
		{"d: 30", 0, true},
		{"d: soon", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var got doc
			err := yaml.Unmarshal([]byte(tc.in), &got)
			if (err != nil) != tc.wantErr {
				t.Fatalf("yaml.Unmarshal(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got.D != tc.want {
				t.Errorf("yaml.Unmarshal(%q) = %v, want %v", tc.in, got.D, tc.want)
			}
			if tc.wantErr {
				return
			}
			out, err := yaml.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back doc
			if err := yaml.Unmarshal(out, &back); err != nil || back != got {
				t.Errorf("round trip of %v through %q = %v, %v", got.D, out, back.D, err)
			}
		})
	}
	if got, want := Duration(90*time.Second).String(), "1m30s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// mapDoc exercises the decoder's support for maps and lists of sections,
// which later config sections (rest, upstreams) will need.
type mapDoc struct {
	Headers map[string]string `yaml:"headers"`
	Items   []struct {
		Name    string   `yaml:"name"`
		Timeout Duration `yaml:"timeout"`
	} `yaml:"items"`
	Untagged int
}

func TestDecodeMapsAndLists(t *testing.T) {
	in := yamlLines(
		"headers:",
		"  X-Api-Key: ${KEY}",
		"  Accept: application/json",
		"items:",
		"  - name: a",
		"    timeout: 2s",
		"  - name: b",
		"    tmeout: 1s",
		"untagged: 3",
	)
	d := newDecoder("t.yaml", envOf(map[string]string{"KEY": "k"}))
	var got mapDoc
	err := decodeForTest(d, in, &got)
	wantErrs := []string{"t.yaml:8:5: items[1].tmeout: unknown key; valid keys: name, timeout"}
	if diff := cmp.Diff(wantErrs, errLines(t, err)); diff != "" {
		t.Errorf("decode errors mismatch (-want +got):\n%s", diff)
	}
	if got.Headers["X-Api-Key"] != "k" || got.Headers["Accept"] != "application/json" || len(got.Headers) != 2 {
		t.Errorf("Headers = %v", got.Headers)
	}
	if len(got.Items) != 2 || got.Items[0].Name != "a" || got.Items[0].Timeout != Duration(2*time.Second) || got.Items[1].Name != "b" {
		t.Errorf("Items = %+v", got.Items)
	}
	if got.Untagged != 3 {
		t.Errorf("Untagged = %d, want 3", got.Untagged)
	}
	if d.fromEnv["headers.X-Api-Key"] != "${KEY}" {
		t.Errorf("fromEnv = %v, want headers.X-Api-Key recorded", d.fromEnv)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(""))
	f.Add(defaultYAML)
	if data, err := os.ReadFile("../config.example.yaml"); err == nil {
		f.Add(data)
	}
	f.Add(yamlLines("server:", "  listen: ${A:-x}", "  listn: 1", "builtin: [a, a]"))
	f.Add(yamlLines("a: &x [*x]", "b: *x", "<<: {c: 1}", "? [k]", ": v"))
	f.Add([]byte("log: {level: !!str 3, format: |\n  $$${B}\n}\n---\nx"))
	f.Add(yamlLines(
		"defaults: {retry: {attempts: 2}}",
		"rest:",
		"  - {name: a, url: 'http://h:1/{x}?q={y}', method: post, headers: {X-K: '${A}'}, retry: {max_backoff: 1s}}",
		"  - {name: b, url: 'http://{h}/', body: {k: [1, 1.5, true, ~, &v x, *v]}, input_schema: {type: object}}",
		"openapi: [{name: o, spec: o.yaml, include: ['[a-'], base_url: 'http://h/v1'}]",
	))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data, &Options{LookupEnv: envOf(map[string]string{"A": "1"}), Builtins: builtinNames})
		if err == nil {
			if cfg == nil {
				t.Fatal("Parse returned neither a config nor an error")
			}
			if verr := cfg.Validate(&Options{Builtins: builtinNames}); verr != nil {
				t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
			}
			return
		}
		for _, line := range errLines(t, err) {
			if !strings.HasPrefix(line, "fuzz.yaml:") {
				t.Fatalf("error line without position: %q", line)
			}
		}
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			if pe := e.(*PosError); pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("error without a line and column: %#v", pe)
			}
		}
	})
}
