package surface

import (
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/principal"
)

// Who may see a source's catalog (issue 31, item 2): a source's resources,
// resource templates and prompts, and completion and subscriptions of
// them, are visible only to principals its tools are visible to. A
// principal with a policy sees a source's catalog when the policy permits
// at least one of the source's tools; a source that serves no tools, when
// the policy permits its namespace itself (Catalog.Namespace, which the
// globs "*" and "<name>__*" match). A client without a policy (no
// authentication, stdio) sees every catalog. What a principal may not see
// is answered as what does not exist: left out of the lists, a read or a
// subscribe refused as an unknown URI, a prompt as an unknown name, a
// completion with no values (the front answers so).

// SetTools records the names of the tools each source serves, by source
// ([registry.Tool.Source]), which decide who may see its catalog.
func (s *Set) SetTools(bySource map[string][]string) { s.tools.Store(&bySource) }

// Visible reports whether id may see cat's source.
func (s *Set) Visible(id *principal.Identity, cat *Catalog) bool {
	return s.VisibleSource(id, cat.source, cat.Namespace)
}

// VisibleSource reports whether id may see what source (whose namespace
// is namespace, "" if none) serves besides tools: its catalog, its log
// messages.
func (s *Set) VisibleSource(id *principal.Identity, source, namespace string) bool {
	if id == nil || id.Policy == nil {
		return true
	}
	names := (*s.tools.Load())[source]
	if len(names) == 0 {
		return namespace != "" && id.Policy.Permits(namespace)
	}
	for _, n := range names {
		if id.Policy.Permits(n) {
			return true
		}
	}
	return false
}

// VisibleTo returns the function that reports whether id may see a
// catalog (none: nil), deciding once per catalog: a list asks for each
// entry.
func (s *Set) VisibleTo(id *principal.Identity) func(*Catalog) bool {
	if id == nil || id.Policy == nil {
		return func(*Catalog) bool { return true }
	}
	seen := map[*Catalog]bool{}
	return func(c *Catalog) bool {
		if c == nil {
			return false
		}
		v, ok := seen[c]
		if !ok {
			v = s.Visible(id, c)
			seen[c] = v
		}
		return v
	}
}

// Readable reports whether id may read (and subscribe to) uri: a source
// it may see serves it.
func (s *Set) Readable(id *principal.Identity, uri string) bool {
	cat := s.Current().Owner(uri)
	return cat != nil && s.Visible(id, cat)
}

// Prompts returns the prompts of the sources id may see, of prompts (the
// served ones, or some of them).
func (s *Set) Prompts(id *principal.Identity, prompts []mcp.Prompt) []mcp.Prompt {
	if id == nil || id.Policy == nil {
		return prompts
	}
	visible, served := s.VisibleTo(id), s.Current().prompts
	out := prompts[:0:0]
	for _, p := range prompts {
		if visible(served[p.Name].Cat) {
			out = append(out, p)
		}
	}
	return out
}

// Resources returns the page of resources/list after cursor that id may
// see, and the cursor of the next page ("" at the end). The list is paged
// by name and URI: names, which upstreams need not keep unique, alone
// would let a page boundary between two of one name skip one.
func (s *Set) Resources(id *principal.Identity, cursor mcp.Cursor) ([]mcp.Resource, mcp.Cursor) {
	cur, visible := s.Current(), s.VisibleTo(id)
	list := keep(cur.resList, func(r mcp.Resource) bool { return visible(cur.resources[r.URI]) })
	return page(list, cursor, func(r mcp.Resource) string { return r.Name + "\x00" + r.URI })
}

// Templates returns the page of resources/templates/list after cursor
// that id may see, paged by name and URI template, and the cursor of the
// next page ("" at the end).
func (s *Set) Templates(id *principal.Identity, cursor mcp.Cursor) ([]mcp.ResourceTemplate, mcp.Cursor) {
	cur, visible := s.Current(), s.VisibleTo(id)
	list := keep(cur.tmplList, func(t mcp.ResourceTemplate) bool { return visible(cur.tmplOwner[t.URITemplate.Raw()]) })
	return page(list, cursor, func(t mcp.ResourceTemplate) string { return t.Name + "\x00" + t.URITemplate.Raw() })
}

// keep returns the entries of list for which ok holds, in order.
func keep[T any](list []T, ok func(T) bool) []T {
	out := make([]T, 0, len(list))
	for _, e := range list {
		if ok(e) {
			out = append(out, e)
		}
	}
	return out
}
