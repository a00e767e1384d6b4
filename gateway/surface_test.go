package gateway

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

func TestConfigCheckUpstreamPrefixes(t *testing.T) {
	got := checkLines(t, yamlLines(
		"rest: [{name: gh_issues, url: 'http://h/'}]",
		"upstreams:",
		"  - {name: a, prefix: '', transport: stdio, command: x}",
		"  - {name: b, prefix: '', transport: stdio, command: x}",
		"  - {name: c, prefix: p_, transport: stdio, command: x}",
		"  - {name: d, prefix: p_, transport: stdio, command: x}",
		"  - {name: e, prefix: gh_, transport: stdio, command: x}",
		"  - {name: f, prefix: 'bad prefix', transport: stdio, command: x}",
		"  - {name: h, transport: stdio, command: x}",
		"  - {name: i, prefix: h__, transport: stdio, command: x}",
	), nil)
	want := []string{
		`t.yaml:6:23: upstreams[3].prefix: "p_" is also the prefix of upstreams[2]'s tools; give one of them another prefix; got "p_"`,
		`t.yaml:7:23: upstreams[4].prefix: clashes with rest[0] ("gh_issues"), whose name starts with "gh_"; change the prefix or rename the tool; got "gh_"`,
		`t.yaml:8:23: upstreams[5].prefix: must be empty or 1 to 34 characters from A-Z a-z 0-9 _ . -, like fs_; leave it out for <name>__; got "bad prefix"`,
		`t.yaml:10:23: upstreams[7].prefix: "h__" is also the prefix of upstreams[6]'s tools; give one of them another prefix; got "h__"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefix problems (-want +got):\n%s", diff)
	}
}

// TestServableTools: an upstream's tool whose schema does not compile, or
// whose name another source has, is dropped alone; the rest of the
// upstream's tools are registered.
func TestServableTools(t *testing.T) {
	g, _ := newGateway(t, nil)
	tool := func(name, schema string) executors.Bound {
		return executors.Bound{Tool: registry.Tool{Name: name, Kind: registry.MCP, Source: "upstream:u", InputSchema: json.RawMessage(schema)}}
	}
	in := []executors.Bound{
		tool("good", `{"type":"object"}`),
		tool("bad", `{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`),
		tool("echo", `{"type":"object"}`), // the gateway's own tool
		tool("also_good", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/a"}},"additionalProperties":false}`),
	}
	var names []string
	for _, b := range g.servableTools("u", in) {
		names = append(names, b.Tool.Name)
	}
	if want := []string{"good", "also_good"}; !slices.Equal(names, want) {
		t.Fatalf("servableTools = %v, want %v", names, want)
	}
	if err := g.addUpstreamTools("u", g.servableTools("u", in)); err != nil {
		t.Fatalf("registering what is left: %v", err)
	}
	if _, ok := g.reg.Get("also_good"); !ok {
		t.Error("also_good was not registered")
	}
	if echo, _ := g.reg.Get("echo"); echo.Source == "upstream:u" {
		t.Error("the upstream's echo replaced the gateway's")
	}
}
