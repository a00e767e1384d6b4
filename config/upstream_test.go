package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseUpstreams(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "toolgate.yaml")
	in := yamlLines(
		"upstreams:",
		"  - name: fs",
		"    transport: stdio",
		"    command: npx",
		"    args: [-y, server-filesystem, /data, '${TOOLGATE_INSTANCE_DIR}/x', '$${TOOLGATE_INSTANCE_DIR}', '${LITERAL}']",
		"    env: {A: b, F: '${TOOLGATE_INSTANCE_DIR}/f-${TOKEN}'}",
		"    cwd: sub",
		"    exclude: [write_*]",
		"    timeout: 1m",
		"  - name: remote",
		"    prefix: ''",
		"    transport: streamable-http",
		"    url: http://127.0.0.1:9000/mcp",
		"    headers: {Authorization: 'Bearer ${TOKEN}'}",
		"    isolation: thread",
		"    startup_timeout: 5s",
		"    max_message_bytes: 65536",
	)
	cfg, err := Parse(file, in, &Options{LookupEnv: envOf(map[string]string{"TOKEN": "s3cret-token", "LITERAL": "${TOOLGATE_INSTANCE_DIR}"})})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Upstream{
		{Name: "fs", Transport: "stdio", Command: "npx", Args: []string{"-y", "server-filesystem", "/data", InstanceDirRef + "/x", "${TOOLGATE_INSTANCE_DIR}", "${TOOLGATE_INSTANCE_DIR}"},
			Env: map[string]string{"A": "b", "F": InstanceDirRef + "/f-s3cret-token"}, Cwd: filepath.Join(dir, "sub"), Isolation: "shared",
			Exclude: []string{"write_*"}, Timeout: Duration(time.Minute), StartupTimeout: Duration(20 * time.Second), MaxMessageBytes: 16 << 20},
		{Name: "remote", Prefix: new(""), Transport: "streamable-http", URL: "http://127.0.0.1:9000/mcp",
			Headers: map[string]string{"Authorization": "Bearer s3cret-token"}, Isolation: "thread",
			StartupTimeout: Duration(5 * time.Second), MaxMessageBytes: 65536},
	}
	if diff := cmp.Diff(want, cfg.Upstreams); diff != "" {
		t.Errorf("Upstreams mismatch (-want +got):\n%s", diff)
	}
	if got := cfg.Secrets(); !slices.Contains(got, "s3cret-token") || slices.Contains(got, InstanceDirRef) {
		t.Errorf("Secrets() = %v, want the token and not the instance directory marker", got)
	}
}

func TestParseUpstreamErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		env  map[string]string
		want []string
	}{
		{
			"transports",
			yamlLines(
				"upstreams:",
				"  - {name: b}",
				"  - {name: c, transport: websocket}",
			),
			nil,
			[]string{
				`t.yaml:2:5: upstreams[0].transport: is required; write one of stdio, sse, streamable-http`,
				`t.yaml:3:26: upstreams[1].transport: must be one of stdio, sse, streamable-http; got "websocket"`,
			},
		},
		{
			"max_message_bytes under 1 KiB",
			yamlLines(
				"upstreams:",
				"  - {name: fs, transport: stdio, command: x, max_message_bytes: 1000}",
				"  - {name: gs, transport: stdio, command: x, max_message_bytes: 0}",
			),
			nil,
			[]string{
				`t.yaml:2:65: upstreams[0].max_message_bytes: must be at least 1024 (1 KiB), like 16777216; leave it out for 16 MiB; got 1000`,
				`t.yaml:3:65: upstreams[1].max_message_bytes: must be at least 1024 (1 KiB), like 16777216; leave it out for 16 MiB; got 0`,
			},
		},
		{
			"${TOOLGATE_INSTANCE_DIR} outside upstreams[].args and env",
			yamlLines(
				"server: {listen: '${TOOLGATE_INSTANCE_DIR}'}",
				"upstreams:",
				"  - {name: fs, transport: stdio, command: x, cwd: '${TOOLGATE_INSTANCE_DIR}'}",
			),
			nil,
			[]string{
				`t.yaml:1:18: server.listen: ${TOOLGATE_INSTANCE_DIR} is set only for the processes of stdio upstreams; use it in upstreams[].args or upstreams[].env`,
				`t.yaml:3:51: upstreams[0].cwd: ${TOOLGATE_INSTANCE_DIR} is set only for the processes of stdio upstreams; use it in upstreams[].args or upstreams[].env`,
			},
		},
		{
			"a NUL byte in args or env",
			yamlLines(
				"upstreams:",
				`  - {name: fs, transport: stdio, command: x, args: ["\0TOOLGATE_INSTANCE_DIR\0"], env: {A: "a\0"}}`,
			),
			nil,
			[]string{
				`t.yaml:2:53: upstreams[0].args[0]: must not contain NUL`,
				`t.yaml:2:92: upstreams[0].env.A: must not contain NUL`,
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
			if strings.Contains(err.Error(), "top-secret") {
				t.Errorf("an error shows the value of KEY:\n%v", err)
			}
		})
	}
}
