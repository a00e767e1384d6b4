package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCatalogSection(t *testing.T) {
	cfg, err := Parse("t.yaml", yamlLines(
		"catalog: {mode: search, always: [toolgate_batch, \"fs__read_*\"]}",
		"upstreams:",
		"  - {name: fs, transport: stdio, command: x, catalog: search}",
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := GatewayCatalog{Mode: CatalogSearch, Always: []string{"toolgate_batch", "fs__read_*"}}
	if diff := cmp.Diff(want, cfg.Catalog); diff != "" || !cfg.Catalog.Search() {
		t.Errorf("catalog (-want +got):\n%s", diff)
	}
	if cfg.Upstreams[0].Catalog != CatalogSearch {
		t.Errorf("upstreams[0].catalog = %q, want search", cfg.Upstreams[0].Catalog)
	}
}

func TestCatalogErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"a mode of none", []string{"catalog: {mode: lots}"}, []string{
			`t.yaml:1:17: catalog.mode: must be tools or search; search lists three meta-tools (toolgate_search, toolgate_describe, toolgate_call) in place of every tool; got "lots"`,
		}},
		{"always without search", []string{"catalog:", "  always: [\"x[\"]"}, []string{
			`t.yaml:2:11: catalog.always: lists tools besides the search meta-tools, so it needs catalog.mode: search (or an endpoint with catalog: search); set the mode or remove always`,
			`t.yaml:2:12: catalog.always[0]: is not a valid glob (* ? [a-z] and \ escapes); got "x["`,
		}},
		{"an upstream's", []string{"upstreams:", "  - {name: fs, transport: stdio, command: x, catalog: find}"}, []string{
			`t.yaml:2:55: upstreams[0].catalog: must be tools or search; search serves the source as three meta-tools (search, describe, call); got "find"`,
		}},
		{"the rest catalog's names", []string{
			"defaults: {catalog: search}",
			"upstreams:",
			"  - {name: rest, transport: stdio, command: x}",
			"rest:",
			"  - {name: rest__x, url: 'http://127.0.0.1/'}",
		}, []string{
			`t.yaml:3:12: upstreams[0].name: is taken: with defaults.catalog: search the rest tools are served as rest__search, rest__describe and rest__call; rename the upstream; got "rest"`,
			`t.yaml:5:12: rest[0].name: is under the rest__ prefix: with defaults.catalog: search the rest tools are served as rest__search, rest__describe and rest__call; rename the tool; got "rest__x"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", yamlLines(tc.in...), nil)
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
