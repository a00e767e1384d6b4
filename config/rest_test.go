package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// restDefaults returns a RESTTool with what Parse fills in for a tool that
// writes only name and url.
func restDefaults(name, url string) RESTTool {
	return RESTTool{Name: name, Method: "GET", URL: url, MaxResponseBytes: 1 << 20}
}

func TestParseREST(t *testing.T) {
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name string
		file string // as given to Parse; "" means t.yaml
		in   []byte
		env  map[string]string
		want *Config
	}{
		{
			"every key",
			"",
			yamlLines(
				"defaults:",
				"  retry: {attempts: 2, initial_backoff: 50ms, max_backoff: 1s}",
				"rest:",
				"  - name: get_item",
				"    description: Fetch one item.",
				"    method: put",
				"    url: http://127.0.0.1:9000/items/{id}?v=1",
				"    query: {fields: '{fields}', lang: en}",
				"    headers:",
				"      Authorization: Bearer ${TOKEN}",
				"      X-Trace: '{trace}'",
				"    body: {id: '{id}'}",
				"    input_schema: {type: object}",
				"    idempotent: false",
				"    timeout: 5s",
				"    retry: {attempts: 4, initial_backoff: 10ms, max_backoff: 20ms}",
				"    max_response_bytes: 4096",
				"    allowed_hosts: [127.0.0.1:9000, 'cdn.example.com']",
				"openapi:",
				"  - name: pets",
				"    spec: https://127.0.0.1:9000/openapi.json",
				"    base_url: http://127.0.0.1:9000/v2",
				"    include: [list*, 'get?et']",
				"    exclude: ['[dD]elete*']",
				"    headers: {X-Key: k}",
				"    timeout: 1m",
				"    retry: {attempts: 1, initial_backoff: 1s, max_backoff: 1s}",
				"    max_response_bytes: 1073741824",
				"    auth: {api_key: '${TOKEN}'}",
				"    max_spec_bytes: 1024",
			),
			map[string]string{"TOKEN": "tok"},
			want(func(c *Config) {
				c.Defaults.Retry = Retry{Attempts: 2, InitialBackoff: ms(50), MaxBackoff: ms(1000), On: defaultRetryOn}
				c.Rest = []RESTTool{{
					Name:             "get_item",
					Description:      "Fetch one item.",
					Method:           "PUT",
					URL:              "http://127.0.0.1:9000/items/{id}?v=1",
					Query:            map[string]string{"fields": "{fields}", "lang": "en"},
					Headers:          map[string]string{"Authorization": "Bearer tok", "X-Trace": "{trace}"},
					Body:             json.RawMessage(`{"id":"{id}"}`),
					InputSchema:      json.RawMessage(`{"type":"object"}`),
					Idempotent:       new(false),
					Timeout:          Duration(5 * time.Second),
					Retry:            &Retry{Attempts: 4, InitialBackoff: ms(10), MaxBackoff: ms(20), On: defaultRetryOn},
					MaxResponseBytes: 4096,
					AllowedHosts:     []string{"127.0.0.1:9000", "cdn.example.com"},
				}}
				c.OpenAPI = []OpenAPISource{{
					Name:             "pets",
					Spec:             "https://127.0.0.1:9000/openapi.json",
					BaseURL:          "http://127.0.0.1:9000/v2",
					Include:          []string{"list*", "get?et"},
					Exclude:          []string{"[dD]elete*"},
					Headers:          map[string]string{"X-Key": "k"},
					Timeout:          Duration(time.Minute),
					Retry:            &Retry{Attempts: 1, InitialBackoff: ms(1000), MaxBackoff: ms(1000), On: defaultRetryOn},
					MaxResponseBytes: 1 << 30,
					Auth:             map[string]string{"api_key": "tok"},
					MaxSpecBytes:     1024,
				}}
			}),
		},
		{
			"method defaults to GET and is stored in upper case",
			"",
			yamlLines(
				"rest:",
				"  - {name: a, url: 'http://h/a'}",
				"  - {name: b, url: 'http://h/b', method: post}",
				"  - {name: c, url: 'http://h/c', method: Delete}",
				"  - {name: d, url: 'http://h/d', method: OPTIONS}",
			),
			nil,
			want(func(c *Config) {
				b, cc, d := restDefaults("b", "http://h/b"), restDefaults("c", "http://h/c"), restDefaults("d", "http://h/d")
				b.Method, cc.Method, d.Method = "POST", "DELETE", "OPTIONS"
				c.Rest = []RESTTool{restDefaults("a", "http://h/a"), b, cc, d}
			}),
		},
		{
			"retry fields left out come from defaults.retry, wherever it is written",
			"",
			yamlLines(
				"rest:",
				"  - {name: none, url: 'http://h/'}",
				"  - {name: empty, url: 'http://h/', retry: }",
				"  - {name: some, url: 'http://h/', retry: {initial_backoff: 1s}}",
				"  - {name: all, url: 'http://h/', retry: {attempts: 1, initial_backoff: 1ms, max_backoff: 2ms, on: [execution]}}",
				"openapi:",
				"  - {name: o, spec: o.yaml, retry: {attempts: 7}}",
				"defaults:",
				"  retry: {attempts: 5, max_backoff: 10s}",
			),
			nil,
			want(func(c *Config) {
				c.Defaults.Retry = Retry{Attempts: 5, InitialBackoff: ms(100), MaxBackoff: Duration(10 * time.Second), On: defaultRetryOn}
				some, all := restDefaults("some", "http://h/"), restDefaults("all", "http://h/")
				some.Retry = &Retry{Attempts: 5, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(10 * time.Second), On: defaultRetryOn}
				all.Retry = &Retry{Attempts: 1, InitialBackoff: ms(1), MaxBackoff: ms(2), On: []string{"execution"}}
				c.Rest = []RESTTool{restDefaults("none", "http://h/"), restDefaults("empty", "http://h/"), some, all}
				c.OpenAPI = []OpenAPISource{{
					Name: "o", Spec: "o.yaml", MaxResponseBytes: 1 << 20, MaxSpecBytes: 16 << 20,
					Retry: &Retry{Attempts: 7, InitialBackoff: ms(100), MaxBackoff: Duration(10 * time.Second), On: defaultRetryOn},
				}}
			}),
		},
		{
			"body and input_schema are YAML converted to JSON",
			"",
			yamlLines(
				"rest:",
				"  - name: a",
				"    url: http://h/",
				"    body:",
				"      z_first: keeps file order",
				"      n: 42",
				"      neg: -7",
				"      hex: 0x1F",
				"      f: 1.5",
				"      big: 1.5e+21",
				"      t: true",
				"      nothing: null",
				"      empty:",
				"      quoted: \"42\"",
				"      tagged: !!str 7",
				"      html: <a & b>",
				"      token: ${TOKEN}",
				"      escaped: $${NOT}",
				"      arg: \"{count}\"",
				"      list: [1, two, {three: 3}]",
				"      block: |",
				"        line 1",
				"        line 2",
				"      nested: &n {k: [v]}",
				"      again: *n",
				"      'key with spaces': 1",
				"    input_schema:",
				"      type: object",
				"      properties: {count: {type: integer, minimum: 0}}",
				"      required: [count]",
				"  - {name: b, url: 'http://h/', method: POST, body: '{payload}'}",
				"  - {name: c, url: 'http://h/', method: POST, body: [1, x]}",
				"  - {name: d, url: 'http://h/', method: POST, body: 3}",
				"  - {name: e, url: 'http://h/', body: null, input_schema: ~}",
				"  - {name: f, url: 'http://h/', body: {}, input_schema: {}}",
			),
			map[string]string{"TOKEN": "tok\"en"},
			want(func(c *Config) {
				a := restDefaults("a", "http://h/")
				a.Body = json.RawMessage(`{"z_first":"keeps file order","n":42,"neg":-7,"hex":31,"f":1.5,"big":1.5e+21,` +
					`"t":true,"nothing":null,"empty":null,"quoted":"42","tagged":"7","html":"<a & b>","token":"tok\"en",` +
					`"escaped":"${NOT}","arg":"{count}","list":[1,"two",{"three":3}],"block":"line 1\nline 2\n",` +
					`"nested":{"k":["v"]},"again":{"k":["v"]},"key with spaces":1}`)
				a.InputSchema = json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer","minimum":0}},"required":["count"]}`)
				b, cc, d := restDefaults("b", "http://h/"), restDefaults("c", "http://h/"), restDefaults("d", "http://h/")
				b.Method, cc.Method, d.Method = "POST", "POST", "POST"
				b.Body = json.RawMessage(`"{payload}"`)
				cc.Body = json.RawMessage(`[1,"x"]`)
				d.Body = json.RawMessage(`3`)
				f := restDefaults("f", "http://h/")
				f.Body, f.InputSchema = json.RawMessage(`{}`), json.RawMessage(`{}`)
				c.Rest = []RESTTool{a, b, cc, d, restDefaults("e", "http://h/"), f}
			}),
		},
		{
			"relative spec paths resolve against the config file's directory",
			filepath.Join("conf", "prod", "toolgate.yaml"),
			yamlLines(
				"openapi:",
				"  - {name: a, spec: specs/a.yaml}",
				"  - {name: b, spec: ../shared/b.json}",
				"  - {name: c, spec: /etc/toolgate/c.yaml}",
				"  - {name: d, spec: 'https://127.0.0.1:9000/d.yaml'}",
				"  - {name: e, spec: '${SPEC_DIR}/e.yaml'}",
			),
			map[string]string{"SPEC_DIR": "from-env"},
			want(func(c *Config) {
				src := func(name, spec string) OpenAPISource {
					return OpenAPISource{Name: name, Spec: spec, MaxResponseBytes: 1 << 20, MaxSpecBytes: 16 << 20}
				}
				c.OpenAPI = []OpenAPISource{
					src("a", filepath.Join("conf", "prod", "specs", "a.yaml")),
					src("b", filepath.Join("conf", "shared", "b.json")),
					src("c", "/etc/toolgate/c.yaml"),
					src("d", "https://127.0.0.1:9000/d.yaml"),
					src("e", filepath.Join("conf", "prod", "from-env", "e.yaml")),
				}
				c.Source = filepath.Join("conf", "prod", "toolgate.yaml")
			}),
		},
		{
			"values from the environment convert by type",
			"",
			yamlLines(
				"rest:",
				"  - name: ${NAME}",
				"    url: ${BASE}/items/{id}",
				"    idempotent: ${IDEM}",
				"    max_response_bytes: ${MAX}",
			),
			map[string]string{"NAME": "env_tool", "BASE": "http://127.0.0.1:9000", "IDEM": "true", "MAX": "100"},
			want(func(c *Config) {
				r := restDefaults("env_tool", "http://127.0.0.1:9000/items/{id}")
				r.Idempotent, r.MaxResponseBytes = new(true), 100
				c.Rest = []RESTTool{r}
			}),
		},
		{
			"braces escaped in the path, and a userinfo",
			"",
			yamlLines("rest:", "  - {name: a, url: 'https://u:p@h:8443/a/{{lit}}/{x}?q={{y}}'}"),
			nil,
			want(func(c *Config) { c.Rest = []RESTTool{restDefaults("a", "https://u:p@h:8443/a/{{lit}}/{x}?q={{y}}")} }),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = "t.yaml"
			}
			got, err := Parse(file, tc.in, &Options{LookupEnv: envOf(tc.env)})
			if err != nil {
				t.Fatalf("Parse(%q) error:\n%v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreSecrets); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
			for i, r := range got.Rest {
				for what, raw := range map[string]json.RawMessage{"body": r.Body, "input_schema": r.InputSchema} {
					if raw != nil && !json.Valid(raw) {
						t.Errorf("rest[%d].%s = %s, not valid JSON", i, what, raw)
					}
				}
			}
			if err := got.Validate(nil); err != nil {
				t.Errorf("Validate() of the parsed config: %v", err)
			}
		})
	}
}

func TestParseRESTErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		env  map[string]string
		want []string
	}{
		{
			"body and input_schema that JSON cannot hold",
			yamlLines(
				"rest:",
				"  - name: a",
				"    url: http://h/",
				"    body:",
				"      1: one",
				"      true: yes",
				"      ok: [.inf, .nan]",
				"      t: !!binary aGk=",
				"      a: *nope",
				"    input_schema: [type, object]",
				"  - {name: b, url: 'http://h/', input_schema: \"{type: object}\"}",
			),
			nil,
			[]string{
				`t.yaml:5:7: rest[0].body.1: JSON keys are strings; quote this key, like "1"`,
				`t.yaml:6:7: rest[0].body.true: JSON keys are strings; quote this key, like "true"`,
				`t.yaml:7:12: rest[0].body.ok[0]: JSON has no infinity or NaN; quote the value to send it as a string`,
				`t.yaml:7:18: rest[0].body.ok[1]: JSON has no infinity or NaN; quote the value to send it as a string`,
				`t.yaml:8:10: rest[0].body.t: unsupported tag !!binary; remove it`,
				`t.yaml:9:10: rest[0].body.a: unknown alias *nope; define it earlier with &nope`,
				`t.yaml:10:19: rest[0].input_schema: must be a mapping (a JSON Schema object), like {type: object, properties: {id: {type: string}}}`,
				`t.yaml:11:47: rest[1].input_schema: must be a mapping (a JSON Schema object), like {type: object, properties: {id: {type: string}}}`,
			},
		},
		{
			"spec",
			yamlLines(
				"openapi:",
				"  - name: a",
				"    spec: ftp://h/spec.yaml",
				"  - {name: b, base_url: 'http://h/v1?x=1'}",
			),
			nil,
			[]string{
				`t.yaml:3:11: openapi[0].spec: must be a file path or an http or https URL, like https://api.example.com/openapi.yaml; got "ftp://h/spec.yaml"`,
				`t.yaml:4:5: openapi[1].spec: is required; write a file path (relative to this file) or an http(s) URL, like examples/petstore.yaml`,
			},
		},
		{
			"retry, timeout and max_response_bytes",
			yamlLines(
				"defaults:",
				"  retry: {attempts: 0}",
				"rest:",
				"  - name: a",
				"    url: http://h/",
				"    timeout: -1s",
				"    retry: {attempts: 11, initial_backoff: 2s, max_backoff: 1s}",
				"    max_response_bytes: 0",
				"  - name: b",
				"    url: http://h/",
				"    retry: {attempts: 2, initial_backoff: 0s, max_backoff: -1s}",
				"    max_response_bytes: 1073741825",
				"openapi:",
				"  - {name: o, spec: o.yaml, retry: {attempts: 3}, max_response_bytes: -1}",
			),
			nil,
			[]string{
				`t.yaml:2:21: defaults.retry.attempts: must be between 1 and 10 (1 means no retries); got 0`,
				`t.yaml:6:14: rest[0].timeout: must be positive, like 10s; leave it out to use defaults.timeout; got -1s`,
				`t.yaml:7:23: rest[0].retry.attempts: must be between 1 and 10 (1 means no retries); got 11`,
				`t.yaml:7:44: rest[0].retry.initial_backoff: must not exceed max_backoff (1s); lower it or raise max_backoff; got 2s`,
				`t.yaml:8:25: rest[0].max_response_bytes: must be between 1 and 1073741824 (1 GiB); got 0`,
				`t.yaml:11:43: rest[1].retry.initial_backoff: must be positive, like 100ms; got 0s`,
				`t.yaml:11:60: rest[1].retry.max_backoff: must be positive, like 5s; got -1s`,
				`t.yaml:12:25: rest[1].max_response_bytes: must be between 1 and 1073741824 (1 GiB); got 1073741825`,
				`t.yaml:14:71: openapi[0].max_response_bytes: must be between 1 and 1073741824 (1 GiB); got -1`,
			},
		},
		{
			"idempotent and unknown keys",
			yamlLines(
				"rest:",
				"  - name: a",
				"    url: http://h/",
				"    idempotent: maybe",
				"    urll: http://h/",
				"rest_tools: []",
			),
			nil,
			[]string{
				`t.yaml:4:17: rest[0].idempotent: expected true or false, got string "maybe"`,
				`t.yaml:5:5: rest[0].urll: unknown key; valid keys: name, description, method, url, query, headers, body, input_schema, idempotent, timeout, retry, max_response_bytes, allowed_hosts, cache`,
				`t.yaml:6:1: rest_tools: unknown key; valid keys: server, defaults, threads, guards, log, builtin, rest, openapi, upstreams, batch_tool, hooks, auth, cluster, token_store, audit, telemetry, endpoints, catalog`,
			},
		},
		{
			"a value that does not decode is reported once",
			yamlLines(
				"rest:",
				"  - {name: a, url: 'http://h/', retry: {attempts: many}, max_response_bytes: lots}",
			),
			nil,
			[]string{
				`t.yaml:2:51: rest[0].retry.attempts: expected an integer, got string "many"`,
				`t.yaml:2:78: rest[0].max_response_bytes: expected an integer, got string "lots"`,
			},
		},
		{
			"sections of the wrong shape",
			yamlLines("rest: {name: a}", "openapi:", "  - [a]", "defaults: {retry: 3}"),
			nil,
			[]string{
				`t.yaml:1:7: rest: expected a list, got a mapping`,
				`t.yaml:3:5: openapi[0]: expected a mapping with keys name, spec, base_url, include, exclude, auth, max_spec_bytes, headers, catalog, timeout, retry, max_response_bytes, cache, got a list`,
				`t.yaml:4:19: defaults.retry: expected a mapping with keys attempts, initial_backoff, max_backoff, on, got integer 3`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", tc.in, &Options{LookupEnv: envOf(tc.env)})
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want errors %q", tc.in, cfg, tc.want)
			}
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("Parse(%q) errors mismatch (-want +got):\n%s", tc.in, diff)
			}
			for k, v := range tc.env {
				for part := range strings.FieldsSeq(v) {
					if len(part) > 3 && strings.Contains(err.Error(), part) {
						t.Errorf("error shows %q from the value of %s:\n%v", part, k, err)
					}
				}
			}
		})
	}
}

// TestJSONAliasBomb checks that aliases repeating a value cannot expand a
// short body into gigabytes ("billion laughs"): 2^25 strings here.
func TestJSONAliasBomb(t *testing.T) {
	lines := []string{"rest:", "  - name: a", "    url: http://h/", "    body:", "      l0: &l0 [x, x]"}
	for i := 1; i < 25; i++ {
		lines = append(lines, fmt.Sprintf("      l%d: &l%d [*l%d, *l%d]", i, i, i-1, i-1))
	}
	_, err := Parse("t.yaml", yamlLines(lines...), nil)
	got := errLines(t, err)
	if len(got) != 1 || !strings.Contains(got[0], "rest[0].body.l") ||
		!strings.HasSuffix(got[0], "add up to more than 4 MiB of JSON; shrink them, or use fewer aliases of large values") {
		t.Errorf("Parse(alias bomb) errors = %q, want one saying the JSON is too large", got)
	}
}

// TestRESTSecretNeverInError puts a value that fails every check into each
// key of the rest and openapi sections from the environment, and checks
// that no error shows it while each one says where it came from.
func TestRESTSecretNeverInError(t *testing.T) {
	const secret = "ftp://sk-live-[Sup3r{S3cret}\r\nX: y"
	in := yamlLines(
		"defaults:",
		"  retry: {attempts: '${S}', initial_backoff: '${S}', max_backoff: '${S}'}",
		"rest:",
		"  - name: ${S}",
		"    method: ${S}",
		"    url: ${S}",
		"    headers: {X-A: '${S}'}",
		"    input_schema: ${S}",
		"    idempotent: ${S}",
		"    timeout: ${S}",
		"    max_response_bytes: ${S}",
		"    allowed_hosts: ['${S}']",
		"openapi:",
		"  - name: ${S}",
		"    spec: ${S}",
		"    base_url: ${S}",
		"    include: ['${S}']",
		"    exclude: ['${S}']",
		"    headers: {X-B: '${S}'}",
		"    retry: ${S}",
	)
	_, err := Parse("t.yaml", in, &Options{LookupEnv: envOf(map[string]string{"S": secret})})
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	lines := errLines(t, err)
	// One per value config checks itself (retry x3, input_schema,
	// idempotent, timeout, max_response_bytes, spec, openapi retry); the
	// others are checked when the gateway builds the tools, and
	// gateway/config_check_test.go holds their half of this test.
	if len(lines) != 9 {
		t.Errorf("got %d errors, want 9 (one per value config checks):\n%v", len(lines), err)
	}
	for _, l := range lines {
		for _, part := range []string{"Sup3r", "S3cret", "sk-live", "ftp:"} {
			if strings.Contains(l, part) {
				t.Errorf("error shows the secret: %s", l)
			}
		}
		if !strings.Contains(l, "(value came from ") {
			t.Errorf("error does not say the value came from the environment: %s", l)
		}
	}
}

func TestSecrets(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		env  map[string]string
		want []string
	}{
		{"no environment", yamlLines("log: {level: debug}"), nil, nil},
		{
			"every expanded value once, in the order first used",
			yamlLines(
				"server:",
				"  listen: ${LISTEN}",
				"rest:",
				"  - name: a",
				"    url: ${BASE}/x?key=${KEY}",
				"    headers: {Authorization: 'Bearer ${TOKEN}', X-Again: '${KEY}'}",
				"    body: {nested: [{secret: '${BODY}'}]}",
				"openapi:",
				"  - name: o",
				"    spec: o.yaml",
				"    headers: {X-Key: '${KEY}${TOKEN}'}",
			),
			map[string]string{
				"LISTEN": "127.0.0.1:1", "BASE": "http://h", "KEY": "k-123",
				"TOKEN": "t-456", "BODY": "b-789", "UNUSED": "never",
			},
			[]string{"127.0.0.1:1", "http://h", "k-123", "t-456", "b-789"},
		},
		{
			"defaults and empty values are not secrets",
			yamlLines(
				"rest:",
				"  - name: a",
				"    url: http://h/",
				"    headers: {A: '${A:-file-default}', B: '${B}', C: '${C:-}', D: '${D:-x}'}",
			),
			map[string]string{"B": "", "D": "from-env"},
			[]string{"from-env"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", tc.in, &Options{LookupEnv: envOf(tc.env)})
			if err != nil {
				t.Fatalf("Parse(%q) error:\n%v", tc.in, err)
			}
			got := cfg.Secrets()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Secrets() mismatch (-want +got):\n%s", diff)
			}
			if len(got) > 0 {
				got[0] = "changed"
				if cfg.Secrets()[0] == "changed" {
					t.Error("Secrets() returned the config's own slice")
				}
			}
		})
	}
	t.Run("a config built in Go has none", func(t *testing.T) {
		if got := want(nil).Secrets(); got != nil {
			t.Errorf("Secrets() = %q, want nil", got)
		}
	})
}

// TestValidateGoREST checks a Config built in Go: nothing is filled in, so
// zero values the file would have defaulted are errors, without positions.
func TestValidateGoREST(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"complete tool", func(c *Config) {
			c.Rest = []RESTTool{restDefaults("a", "http://h/{x}")}
			c.Rest[0].Method = ""
		}, nil},
		{"zero values", func(c *Config) {
			c.Rest = []RESTTool{{Name: "a", Method: "get", URL: "http://h/", Retry: &Retry{Attempts: 2}}}
			c.OpenAPI = []OpenAPISource{{Name: "o", Spec: "o.yaml", MaxResponseBytes: 1}}
			c.Defaults.Retry = Retry{}
		}, []string{
			`mem: defaults.retry.attempts: must be between 1 and 10 (1 means no retries); got 0`,
			`mem: defaults.retry.initial_backoff: must be positive, like 100ms; got 0s`,
			`mem: defaults.retry.max_backoff: must be positive, like 5s; got 0s`,
			`mem: rest[0].retry.initial_backoff: must be positive, like 100ms; got 0s`,
			`mem: rest[0].retry.max_backoff: must be positive, like 5s; got 0s`,
			`mem: rest[0].max_response_bytes: must be between 1 and 1073741824 (1 GiB); got 0`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := want(tc.mutate)
			c.Source = "mem"
			if diff := cmp.Diff(tc.want, errLines(t, c.Validate(nil))); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConfigLocate checks that a problem found outside config is placed and
// formatted as config's own are.
func TestConfigLocate(t *testing.T) {
	in := yamlLines(
		"rest:",
		"  - name: a",
		"    url: http://h/",
		"    method: FETCH",
		"    headers: {Bad Header: x, X-Env: '${TOKEN}'}",
	)
	cfg, err := Parse("t.yaml", in, &Options{LookupEnv: envOf(map[string]string{"TOKEN": "s3cret"})})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Path: "rest[0].method", Got: "FETCH", Msg: "is not supported"}, `t.yaml:4:13: rest[0].method: is not supported; got "FETCH"`},
		{Problem{Path: `rest[0].headers."Bad Header"`, Key: true, Got: "Bad Header", Msg: "is not a token"}, `t.yaml:5:15: rest[0].headers."Bad Header": is not a token; got "Bad Header"`},
		{Problem{Path: "rest[0].headers.X-Env", Got: "s3cret", Msg: "is bad"}, `t.yaml:5:37: rest[0].headers.X-Env: is bad (value came from ${TOKEN})`},
		{Problem{Path: "rest[0].url.nowhere", Msg: "falls back"}, `t.yaml:3:10: rest[0].url.nowhere: falls back`},
	}
	for _, tc := range tests {
		if got := cfg.Locate(tc.p).Error(); got != tc.want {
			t.Errorf("Locate(%+v) = %s, want %s", tc.p, got, tc.want)
		}
	}
	goCfg := want(nil)
	goCfg.Source = "mem"
	if got, want := goCfg.Locate(Problem{Path: "rest[0].url", Got: "x", Msg: "m"}).Error(), `mem: rest[0].url: m; got "x"`; got != want {
		t.Errorf("Locate on a Config built in Go = %s, want %s", got, want)
	}
}
