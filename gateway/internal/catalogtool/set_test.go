package catalogtool

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/registry"
)

// tools returns reg's tools.
func tools(reg *fakeRegistry) []*registry.Tool {
	var all []*registry.Tool
	for _, t := range reg.tools {
		all = append(all, t)
	}
	return all
}

// fsSet is a set serving fsRegistry's fs tools and a rest tool through
// catalogs of their own, and an OpenAPI source "shop".
func fsSet(t *testing.T, reg *fakeRegistry, always []string, global bool) (*Set, *Catalog) {
	t.Helper()
	reg.tools["rest__weather"] = &registry.Tool{Name: "rest__weather", Source: "rest:weather"}
	s := NewSet(Env{Tool: reg.get})
	if global {
		s.Global("toolgate_", always, tools(reg))
	}
	s.Group(TrackOptions{Name: "fs", Prefix: "fs__", Member: func(t *registry.Tool) bool { return t.Source == "upstream:fs" }}, "upstream:fs", tools(reg))
	s.Group(TrackOptions{Name: "rest", Prefix: "rest__", Member: func(t *registry.Tool) bool { return strings.HasPrefix(t.Source, "rest:") }}, "", tools(reg))
	d, err := openapi.Open(openapi.Source{Name: "shop", Spec: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	shop := s.OpenAPI("shop", d)
	s.Serve(shop)
	return s, shop
}

func TestSetHiddenBy(t *testing.T) {
	reg := fsRegistry()
	s, shop := fsSet(t, reg, nil, false)
	get := func(name, source string) *registry.Tool { return &registry.Tool{Name: name, Source: source} }
	for _, tc := range []struct {
		tool *registry.Tool
		want string // the search tool of the catalog hiding it, "" when listed
	}{
		{get("fs__read_text_file", "upstream:fs"), "fs__search"},
		{get("rest__weather", "rest:weather"), "rest__search"},
		{get("getPet", "openapi:shop"), "shop__search"},
		{get("calc", "go"), ""},
		{get("fs__search", "catalog:fs"), ""},
		{get("rest__search", "catalog:rest"), ""},
	} {
		for _, search := range []bool{false, true} { // no gateway-wide catalog: the same at every front
			var got string
			if c := s.HiddenBy(tc.tool, search); c != nil {
				got = c.MetaName(Search)
			}
			if got != tc.want || s.Listed(tc.tool, search) != (tc.want == "") {
				t.Errorf("HiddenBy(%s, %v) = %q (listed %v), want %q", tc.tool.Name, search, got, s.Listed(tc.tool, search), tc.want)
			}
		}
	}
	if s.Of("openapi:shop") != shop || s.Of("upstream:fs") == nil || s.Of("rest:weather") != nil {
		t.Error("Of does not find the catalogs of single sources by source")
	}
}

func TestSetGlobal(t *testing.T) {
	reg := fsRegistry()
	s, _ := fsSet(t, reg, []string{"ca*"}, true)
	for name, want := range map[string]string{
		"fs__read_text_file": "toolgate_search",
		"rest__weather":      "toolgate_search",
		"calc":               "", // catalog.always
		"toolgate_search":    "",
	} {
		var got string
		if c := s.HiddenBy(&registry.Tool{Name: name, Source: "x"}, true); c != nil {
			got = c.MetaName(Search)
		}
		if got != want {
			t.Errorf("HiddenBy(%s, search) = %q, want %q", name, got, want)
		}
	}
	// A front that lists each tool (an endpoint with catalog: tools)
	// lists every tool of no catalog of its own, and never the
	// gateway-wide meta-tools.
	for name, want := range map[string]bool{"fs__read_text_file": true, "calc": true, "toolgate_search": false, "toolgate_call": false} {
		tool := &registry.Tool{Name: name, Source: "x"}
		if c := s.HiddenBy(tool, false); c != nil || s.Listed(tool, false) != want {
			t.Errorf("at a tools front, HiddenBy(%s) = %v, Listed = %v; want nil, %v", name, c, s.Listed(tool, false), want)
		}
	}
	// The global catalog holds the tools but the meta-tools and the
	// OpenAPI catalogs' (reached through them); it follows the registry.
	for tool, want := range map[*registry.Tool]bool{
		{Name: "a", Source: "upstream:fs"}:  true,
		{Name: "b", Source: "catalog:fs"}:   false,
		{Name: "c", Source: "openapi:shop"}: false,
	} {
		if got := s.inGlobal(tool); got != want {
			t.Errorf("inGlobal(%s of %s) = %v, want %v", tool.Name, tool.Source, got, want)
		}
	}
	before := s.global.ix.len()
	s.Changed(registry.Change{Added: []*registry.Tool{{Name: "new", Source: "go"}}, Removed: []string{"calc"}})
	if _, ok := s.global.ix.get("new"); !ok || s.global.ix.len() != before {
		t.Errorf("after a change the global catalog holds %d tools (new: %v), want %d", s.global.ix.len(), ok, before)
	}
}

func TestSetVisibleNotFound(t *testing.T) {
	reg := fsRegistry()
	s, _ := fsSet(t, reg, nil, false)
	err := s.VisibleNotFound(&registry.NotFoundError{Name: "fs_read", Ambiguous: true,
		Suggestions: []string{"fs__read_text_file", "fs__write_file", "calc"}}, false)
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || !slices.Equal(nf.Suggestions, []string{"fs__search", "calc"}) || !nf.Ambiguous || nf.Available != -1 {
		t.Errorf("VisibleNotFound = %#v, want the hidden tools replaced by fs__search, once", err)
	}
	other := errors.New("not a name's")
	if got := s.VisibleNotFound(other, false); got != other {
		t.Errorf("VisibleNotFound(%v) = %v, want it unchanged", other, got)
	}
	if empty := NewSet(Env{Tool: reg.get}); empty.VisibleNotFound(&registry.NotFoundError{Name: "x", Suggestions: []string{"fs__write_file"}}, false).(*registry.NotFoundError).Suggestions[0] != "fs__write_file" {
		t.Error("a set without catalogs changed a suggestion")
	}
	// With a gateway-wide catalog for search fronts only, a tools front
	// never suggests its meta-tools; a search front suggests search.
	reg.tools["toolgate_search"] = &registry.Tool{Name: "toolgate_search", Source: "catalog:toolgate"}
	g, _ := fsSet(t, reg, nil, true)
	nf, _ = errors.AsType[*registry.NotFoundError](g.VisibleNotFound(&registry.NotFoundError{Name: "toolgate_serch", Suggestions: []string{"toolgate_search", "calc"}}, false))
	if nf == nil || !slices.Equal(nf.Suggestions, []string{"calc"}) {
		t.Errorf("at a tools front, VisibleNotFound = %#v, want only calc suggested", nf)
	}
	nf, _ = errors.AsType[*registry.NotFoundError](g.VisibleNotFound(&registry.NotFoundError{Name: "toolgate_serch", Suggestions: []string{"toolgate_search", "calc"}}, true))
	if nf == nil || !slices.Equal(nf.Suggestions, []string{"toolgate_search"}) {
		t.Errorf("at a search front, VisibleNotFound = %#v, want toolgate_search suggested", nf)
	}
}
