package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCache(t *testing.T) {
	cfg, err := Parse("t.yaml", yamlLines(
		"rest:",
		"  - {name: a, url: http://x/a, cache: {ttl: 30s}}",
		"  - {name: b, method: head, url: http://x/b, cache: {ttl: 1m, max_bytes: 2048, public: true}}",
		"  - {name: c, method: POST, url: http://x/c}",
		"openapi:",
		"  - {name: o, spec: o.yaml, cache: {ttl: 5s}}",
		"upstreams:",
		"  - {name: u, transport: stdio, command: x, cache: {ttl: 10s, max_bytes: 4096}}",
	), &Options{LookupEnv: envOf(nil)})
	if err != nil {
		t.Fatal(err)
	}
	got := []*Cache{cfg.Rest[0].Cache, cfg.Rest[1].Cache, cfg.Rest[2].Cache, cfg.OpenAPI[0].Cache, cfg.Upstreams[0].Cache}
	want := []*Cache{
		{TTL: Duration(30 * time.Second), MaxBytes: 16 << 20},
		{TTL: Duration(time.Minute), MaxBytes: 2048, Public: true},
		nil,
		{TTL: Duration(5 * time.Second), MaxBytes: 16 << 20},
		{TTL: Duration(10 * time.Second), MaxBytes: 4096},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("caches (-want +got):\n%s", diff)
	}
}

func TestParseCacheErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{
			"values",
			yamlLines(
				"rest:",
				"  - {name: a, url: http://x/a, cache: {ttl: 0s, max_bytes: 0}}",
				"  - {name: b, url: http://x/b, cache: {ttl: 25h, max_bytes: 2147483648}}",
				"openapi:",
				"  - {name: o, spec: o.yaml, cache: {max_bytes: 100}}",
				"upstreams:",
				"  - {name: u, transport: stdio, command: x, cache: {ttl: -1s}}",
			),
			[]string{
				`t.yaml:2:45: rest[0].cache.ttl: is required: a positive duration up to 24h, like 30s, for how long a result is served from the cache; got 0s`,
				`t.yaml:2:60: rest[0].cache.max_bytes: must be between 1024 and 1073741824 (1 GiB), like 16777216 (16 MiB); leave it out for 16 MiB; got 0`,
				`t.yaml:3:45: rest[1].cache.ttl: is required: a positive duration up to 24h, like 30s, for how long a result is served from the cache; got 25h0m0s`,
				`t.yaml:3:61: rest[1].cache.max_bytes: must be between 1024 and 1073741824 (1 GiB), like 16777216 (16 MiB); leave it out for 16 MiB; got 2147483648`,
				`t.yaml:5:29: openapi[0].cache.ttl: is required: a positive duration up to 24h, like 30s, for how long a result is served from the cache; got 0s`,
				`t.yaml:5:48: openapi[0].cache.max_bytes: must be between 1024 and 1073741824 (1 GiB), like 16777216 (16 MiB); leave it out for 16 MiB; got 100`,
				`t.yaml:7:58: upstreams[0].cache.ttl: is required: a positive duration up to 24h, like 30s, for how long a result is served from the cache; got -1s`,
			},
		},
		{
			"tools that are not read-only",
			yamlLines(
				"rest:",
				"  - name: create",
				"    method: post",
				"    url: http://x/c",
				"    cache: {ttl: 30s}",
				"  - {name: counter, url: http://x/n, idempotent: false, cache: {ttl: 30s}}",
				"upstreams:",
				"  - {name: t, transport: stdio, command: x, isolation: thread, cache: {ttl: 30s}}",
				"  - {name: e, transport: stdio, command: x, idempotent: false, cache: {ttl: 30s}}",
			),
			[]string{
				`t.yaml:5:5: rest[0].cache: tool "create" is a POST, which may change something: only GET and HEAD tools are read-only and may be cached; remove cache`,
				`t.yaml:6:57: rest[1].cache: tool "counter" is marked idempotent: false, so a repeated call has an effect of its own and is never answered from a cache; remove cache or idempotent: false`,
				`t.yaml:8:64: upstreams[0].cache: upstream "t" runs one server per thread (isolation: thread): its tools are thread-scoped and never cached; remove cache or use isolation: shared`,
				`t.yaml:9:64: upstreams[1].cache: upstream "e" is marked idempotent: false, so none of its tools is cached; remove cache or idempotent: false`,
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
