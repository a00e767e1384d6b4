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
		"    transport: streamable-http",
		"    url: http://127.0.0.1:9000/mcp",
		"    headers: {Authorization: 'Bearer ${TOKEN}'}",
		"    isolation: thread",
		"    startup_timeout: 5s",
	)
	cfg, err := Parse(file, in, &Options{LookupEnv: envOf(map[string]string{"TOKEN": "s3cret-token", "LITERAL": "${TOOLGATE_INSTANCE_DIR}"})})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Upstream{
		{Name: "fs", Transport: "stdio", Command: "npx", Args: []string{"-y", "server-filesystem", "/data", InstanceDirRef + "/x", "${TOOLGATE_INSTANCE_DIR}", "${TOOLGATE_INSTANCE_DIR}"},
			Env: map[string]string{"A": "b", "F": InstanceDirRef + "/f-s3cret-token"}, Cwd: filepath.Join(dir, "sub"), Isolation: "shared",
			Exclude: []string{"write_*"}, Timeout: Duration(time.Minute), StartupTimeout: Duration(20 * time.Second)},
		{Name: "remote", Transport: "streamable-http", URL: "http://127.0.0.1:9000/mcp",
			Headers: map[string]string{"Authorization": "Bearer s3cret-token"}, Isolation: "thread",
			StartupTimeout: Duration(5 * time.Second)},
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
			"required fields and transports",
			yamlLines(
				"upstreams:",
				"  - {transport: stdio}",
				"  - {name: b}",
				"  - {name: c, transport: websocket}",
				"  - {name: d, transport: sse}",
			),
			nil,
			[]string{
				`t.yaml:2:5: upstreams[0].name: is required; name the upstream, like fs (its tools are named fs__<tool>)`,
				`t.yaml:2:5: upstreams[0].command: is required for transport: stdio; write the program to start, like npx`,
				`t.yaml:3:5: upstreams[1].transport: is required; write one of stdio, sse, streamable-http`,
				`t.yaml:4:26: upstreams[2].transport: must be one of stdio, sse, streamable-http; got "websocket"`,
				`t.yaml:5:5: upstreams[3].url: is required for transport: sse; write the server's endpoint, like http://127.0.0.1:9000/mcp`,
			},
		},
		{
			"fields of another transport, names, isolation, globs",
			yamlLines(
				"rest: [{name: fs__x, url: 'http://h/'}]",
				"upstreams:",
				"  - {name: fs, transport: stdio, command: x, url: 'http://h/mcp'}",
				"  - {name: h, transport: streamable-http, url: 'ftp://h', command: x, isolation: process}",
				"  - {name: h, transport: sse, url: 'http://h/sse', include: ['[']}",
				"  - {name: a__b, transport: stdio, command: x}",
			),
			nil,
			[]string{
				`t.yaml:3:12: upstreams[0].name: clashes with rest[0] ("fs__x"), as this upstream's tools are named fs__<tool>; rename the upstream or the tool; got "fs"`,
				`t.yaml:3:51: upstreams[0].url: is only for transport: sse or streamable-http; remove it, or change the transport`,
				`t.yaml:4:48: upstreams[1].url: must be an absolute http or https URL, like http://127.0.0.1:9000/mcp; got "ftp://h"`,
				`t.yaml:4:68: upstreams[1].command: is only for transport: stdio; remove it, or change the transport`,
				`t.yaml:4:82: upstreams[1].isolation: must be one of shared, thread; got "process"`,
				`t.yaml:5:12: upstreams[2].name: duplicate upstream name, already used by upstreams[1]; rename one; got "h"`,
				`t.yaml:5:62: upstreams[2].include[0]: is not a valid glob (* ? [a-z] and \ to escape, as in Go's path.Match); write \[ for a literal [; got "["`,
				`t.yaml:6:12: upstreams[3].name: must be 1 to 32 characters from A-Z a-z 0-9 _ . - with no __, like fs; got "a__b"`,
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
		{
			"a header value with CR from the environment is refused without showing it",
			yamlLines("upstreams:", "  - {name: r, transport: sse, url: 'http://h/sse', headers: {X-Key: '${KEY}'}}"),
			map[string]string{"KEY": "top-secret\r\nInjected: yes"},
			[]string{
				`t.yaml:2:69: upstreams[0].headers.X-Key: a header value must not contain CR, LF or NUL; put it on one line (value came from ${KEY})`,
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
