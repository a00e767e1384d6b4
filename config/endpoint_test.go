package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEndpoints(t *testing.T) {
	cfg, err := Parse("t.yaml", yamlLines(
		"endpoints:",
		"  - name: gh",
		"    tools: [\"gh__*\", calc]",
		"    instructions: GitHub only",
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{{Name: "gh", Tools: []string{"gh__*", "calc"}, Instructions: "GitHub only"}}
	if diff := cmp.Diff(want, cfg.Endpoints); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if got := EndpointPath("/mcp", "gh"); got != "/mcp/gh" {
		t.Errorf("EndpointPath(/mcp, gh) = %q", got)
	}
	if got := EndpointPath("/", "gh"); got != "/gh" {
		t.Errorf("EndpointPath(/, gh) = %q", got)
	}
}

func TestEndpointErrors(t *testing.T) {
	_, err := Parse("t.yaml", yamlLines(
		"endpoints:",
		"  - name: GitHub",
		"    tools: [\"gh__[\"]",
		"  - name: sse",
		"    tools: [x]",
		"  - name: ops",
		"  - name: ops",
		"    tools: [y]",
		"    principals: [alice]",
		"  - tools: [z]",
	), nil)
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	want := []string{
		`t.yaml:2:11: endpoints[0].name: must be lowercase letters, digits, - and _ (at most 63, starting with a letter or digit), like github; got "GitHub"`,
		`t.yaml:3:13: endpoints[0].tools[0]: is not a valid glob (* ? [a-z] and \ escapes); got "gh__["`,
		`t.yaml:4:11: endpoints[1].name: is reserved for toolgate's own /sse; pick another name; got "sse"`,
		`t.yaml:6:5: endpoints[2].tools: is required: globs of the tools the endpoint serves, like ["gh__*"]`,
		`t.yaml:7:11: endpoints[3].name: is already the name of endpoints[2]; each endpoint needs its own; got "ops"`,
		`t.yaml:9:17: endpoints[3].principals: needs authentication: without an auth section every client is one anonymous principal; remove principals or configure auth`,
		`t.yaml:10:5: endpoints[4].name: is required: one path segment, like github`,
	}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestEndpointCatalog(t *testing.T) {
	cfg, err := Parse("t.yaml", yamlLines(
		"catalog: {always: [toolgate_batch]}",
		"endpoints:",
		"  - {name: gh, tools: [\"gh__*\"], catalog: search}",
		"  - {name: ops, tools: [\"ops__*\"], catalog: tools}",
		"  - {name: all, tools: [\"*\"]}",
	), nil)
	if err != nil {
		t.Fatal(err) // always is allowed: an endpoint lists the meta-tools
	}
	for i, want := range []bool{true, false, false} {
		if got := cfg.Endpoints[i].Search(cfg.Catalog); got != want {
			t.Errorf("endpoints[%d].Search() = %v, want %v", i, got, want)
		}
	}
	// Without its own catalog an endpoint lists as the top-level mode says.
	top := GatewayCatalog{Mode: CatalogSearch}
	for i, want := range []bool{true, false, true} {
		if got := cfg.Endpoints[i].Search(top); got != want {
			t.Errorf("under catalog.mode: search, endpoints[%d].Search() = %v, want %v", i, got, want)
		}
	}
}

func TestEndpointCatalogError(t *testing.T) {
	_, err := Parse("t.yaml", yamlLines(
		"endpoints:",
		"  - name: gh",
		"    tools: [\"gh__*\"]",
		"    catalog: find",
	), nil)
	want := []string{
		`t.yaml:4:14: endpoints[0].catalog: must be tools or search; search lists the meta-tools toolgate_search, toolgate_describe and toolgate_call in place of the endpoint's tools; got "find"`,
	}
	if err == nil {
		t.Fatal("Parse succeeded, want an error")
	}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
