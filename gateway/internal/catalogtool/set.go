package catalogtool

import (
	"errors"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/registry"
)

// Set is the catalogs one gateway serves: the OpenAPI sources' and the
// tracking catalogs (the gateway-wide one, the rest tools', upstreams'),
// kept up to date with the registry ([Set.Changed]), and which of them
// hides each registered tool from a front's tools/list ([Set.HiddenBy]). Its
// catalogs are added before any tool is registered, never after; from
// then on its methods are safe for concurrent use.
type Set struct {
	env      Env
	global   *Catalog            // the gateway-wide catalog (catalog.mode: search), or nil
	always   []string            // globs of the tools global leaves listed (catalog.always)
	bySource map[string]*Catalog // an OpenAPI source's or an upstream's, by their tools' registry source
	groups   []*Catalog          // tracking catalogs of no one source (the rest tools')

	mu       sync.Mutex // guards tracking
	tracking []*Catalog // the catalogs following the registry
}

// NewSet returns an empty set whose catalogs are served with env.
func NewSet(env Env) *Set { return &Set{env: env, bySource: map[string]*Catalog{}} }

// Global starts the gateway-wide catalog, whose meta-tools' names start
// with prefix: it holds every tool (tools are those registered already)
// but the catalogs' meta-tools and the OpenAPI catalogs' tools, which it
// reaches through those catalogs ([Catalog.Include]), and hides each but
// those whose names match a glob of always.
func (s *Set) Global(prefix string, always []string, tools []*registry.Tool) *Catalog {
	s.global = NewTracking(TrackOptions{Prefix: prefix, Member: s.inGlobal}, s.env)
	s.always = always
	s.follow(s.global, tools)
	return s.global
}

// Group starts a tracking catalog of the tools o selects, holding tools
// (those registered already) and following the registry from now on; it
// hides what it holds. source, when not "", is the registry source of all
// of its tools (an upstream's): [Set.Of] finds it by source.
func (s *Set) Group(o TrackOptions, source string, tools []*registry.Tool) *Catalog {
	c := NewTracking(o, s.env)
	if source != "" {
		s.bySource[source] = c
	} else {
		s.groups = append(s.groups, c)
	}
	s.follow(c, tools)
	return c
}

// OpenAPI starts the catalog of OpenAPI source name, whose document is d
// ([New]); the gateway-wide catalog includes it. It hides its tools once
// served ([Set.Serve]).
func (s *Set) OpenAPI(name string, d *openapi.Document) *Catalog {
	c := New(name, d, s.env)
	if s.global != nil {
		s.global.Include(c)
	}
	return c
}

// Serve records c, an OpenAPI catalog whose tools are about to be
// registered, as the catalog of its source.
func (s *Set) Serve(c *Catalog) { s.bySource[c.Source()] = c }

// Of returns the catalog of the tools of registry source source, or nil.
func (s *Set) Of(source string) *Catalog { return s.bySource[source] }

// follow makes c, a tracking catalog, follow the registry from now on,
// holding tools.
func (s *Set) follow(c *Catalog, tools []*registry.Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Track(tools, nil)
	s.tracking = append(s.tracking, c)
}

// Changed gives the tracking catalogs a change of the registry.
func (s *Set) Changed(c registry.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cat := range s.tracking {
		cat.Track(c.Added, c.Removed)
	}
}

// inGlobal reports whether the gateway-wide catalog holds t: every tool
// but the catalogs' meta-tools and the OpenAPI catalogs' tools, which it
// reaches through those catalogs.
func (s *Set) inGlobal(t *registry.Tool) bool {
	if strings.HasPrefix(t.Source, "catalog:") {
		return false
	}
	c, ok := s.bySource[t.Source]
	return !ok || c.Source() == ""
}

// HiddenBy returns the catalog whose meta-tools serve t in place of
// tools/list at a front, or nil when t is listed there or is not served
// there at all ([Set.Listed]). search says whether the front lists the
// gateway-wide catalog's meta-tools: there, every tool but those and
// always's is behind it. At any front a tool of a source served through
// a catalog is behind its source's.
func (s *Set) HiddenBy(t *registry.Tool, search bool) *Catalog {
	if search && s.global != nil && !s.global.IsMeta(t.Name) && !s.alwaysListed(t.Name) {
		return s.global
	}
	if c, ok := s.bySource[t.Source]; ok {
		return c
	}
	for _, c := range s.groups {
		if !c.IsMeta(t.Name) && c.member(t) {
			return c
		}
	}
	return nil
}

// Listed reports whether a front lists t (search: as [Set.HiddenBy]
// says): t is behind no catalog there, and is not one of the
// gateway-wide catalog's meta-tools at a front that lists each tool,
// which has no such tools at all (a gateway whose endpoints alone are
// served through search).
func (s *Set) Listed(t *registry.Tool, search bool) bool {
	return s.HiddenBy(t, search) == nil && (search || s.global == nil || !s.global.IsMeta(t.Name))
}

// alwaysListed reports whether always lists the tool called name.
func (s *Set) alwaysListed(name string) bool {
	for _, glob := range s.always {
		if ok, _ := path.Match(glob, name); ok {
			return true
		}
	}
	return false
}

// VisibleNotFound returns err, a name resolution's error for a client
// of a front (search: as [Set.HiddenBy] says), without the hidden tools
// it would suggest: each becomes the search tool of the catalog it is
// behind, and a tool the front does not serve at all is left out.
func (s *Set) VisibleNotFound(err error, search bool) error {
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || (len(s.bySource) == 0 && s.global == nil && len(s.groups) == 0) {
		return err
	}
	v := &registry.NotFoundError{Name: nf.Name, Available: -1, Ambiguous: nf.Ambiguous}
	for _, name := range nf.Suggestions {
		if t, ok := s.env.Tool(name); ok {
			if c := s.HiddenBy(t, search); c != nil {
				name = c.MetaName(Search)
			} else if !s.Listed(t, search) {
				continue
			}
		}
		if !slices.Contains(v.Suggestions, name) {
			v.Suggestions = append(v.Suggestions, name)
		}
	}
	v.Ambiguous = v.Ambiguous && len(v.Suggestions) > 1
	return v
}
