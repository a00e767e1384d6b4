// Package surface is what toolgate serves of its sources (upstream MCP
// servers) besides tools: the resources, resource templates and prompts
// each source lists ([Catalog]), merged into one surface that says which
// source serves what, and who may see each source's (scope.go); and the
// logging level passed on to the sources (levels.go).
//
// It owns the rules, not the wire: the MCP front
// (gateway/internal/mcpfront) registers what a change lists with mcp-go,
// answers the requests and forwards them through a catalog's Forward.
// surface must not import mcp-go's server, gateway or mcpfront; mcp-go's
// types are its vocabulary.
package surface

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/mcppeer"
)

// PageSize is how many entries one page of a list holds; a longer list
// ends its page with nextCursor.
const PageSize = 100

// Catalog is what one source (an upstream MCP server) offers besides
// tools: its resources, resource templates and prompts, served by the
// front as the source listed them (URIs unchanged, prompts under their
// served names), and the function that forwards a client's requests about
// them to the source.
type Catalog struct {
	// Resources and Templates are the source's resources/list and
	// resources/templates/list entries, raw.
	Resources, Templates []json.RawMessage
	// Prompts are the source's prompts.
	Prompts []CatalogPrompt
	// Subscribe says the source serves resources/subscribe; Completions,
	// completion/complete.
	Subscribe, Completions bool
	// Forward sends a request to the source (resources/read, prompts/get
	// with the prompt's own name, completion/complete, resources/
	// subscribe and unsubscribe) and returns its result, raw. peer is the
	// client the request came from (nil when none), to whom the source's
	// own requests during it are relayed. An error with an RPCCode() int
	// method is the source's JSON-RPC error.
	Forward func(ctx context.Context, peer mcppeer.Peer, method string, params any) (json.RawMessage, error)
	// Namespace is the prefix of the source's tool names ("ev__"): a
	// source that serves no tools is visible to the principals whose
	// policy permits it (scope.go). "" hides such a source from every
	// principal with a policy.
	Namespace string

	source string // the name Put was given, as the source's tools name it (registry.Tool.Source)
}

// CatalogPrompt is one prompt of a source: Name is how the front serves
// it, Orig the source's own name, Raw its prompts/list entry.
type CatalogPrompt struct {
	Name, Orig string
	Raw        json.RawMessage
}

// Resource, Template and Prompt are what the surface serves, each with
// the catalog of the source serving it (and a prompt with the source's
// own name of it).
type (
	Resource struct {
		Def mcp.Resource
		Cat *Catalog
	}
	Template struct {
		Def mcp.ResourceTemplate
		Cat *Catalog
	}
	Prompt struct {
		Def  mcp.Prompt
		Orig string
		Cat  *Catalog
	}
)

// Surface is what is served of every source's catalog, made anew as a
// whole on every change and never changed after: safe for concurrent
// reads.
type Surface struct {
	resources map[string]*Catalog    // URI → the source serving it
	resList   []mcp.Resource         // sorted by name, then URI: the order resources/list pages through
	tmplList  []mcp.ResourceTemplate // sorted by name, then URI template
	tmplOwner map[string]*Catalog    // URI template → the source serving it
	templates []Template             // in the order sources win
	prompts   map[string]Prompt      // served name → the prompt
	raw       map[string][]byte      // kind → what was listed, to tell unchanged kinds
}

// Listing is what a change ([Set.Put]) leaves served, by kind, in the
// order sources win, and whether each kind differs from before: a kind
// that did not change need not be served again (each time it is, every
// client is told its list changed).
type Listing struct {
	Resources                                          []Resource
	Templates                                          []Template
	Prompts                                            []Prompt
	ResourcesChanged, TemplatesChanged, PromptsChanged bool
}

// Set is the sources' catalogs and the surface served of them. Build it
// with [New]; its methods are safe for concurrent use.
type Set struct {
	logger *slog.Logger

	mu      sync.Mutex          // guards bySrc and applying a change
	bySrc   map[string]*Catalog // source → its catalog
	current atomic.Pointer[Surface]
	// tools are the names of the tools each source serves, for who may
	// see its catalog (scope.go).
	tools atomic.Pointer[map[string][]string]
}

// New returns a Set with no catalogs, which warns on logger of what it
// cannot serve (nil: discards).
func New(logger *slog.Logger) *Set {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{logger: logger, bySrc: map[string]*Catalog{}}
	s.current.Store(&Surface{})
	s.tools.Store(&map[string][]string{})
	return s
}

// Current is the surface served now.
func (s *Set) Current() *Surface { return s.current.Load() }

// Put replaces source's catalog with c (nil: removes it) and serves the
// union of every source's: a resource URI, template or prompt name two
// sources both list is served from the source whose name sorts first, and
// the other's is dropped with a warning naming both; what cannot be read
// is skipped with a warning. serve is given what is served from now on,
// before it is [Set.Current], and Puts call it one at a time, in order.
func (s *Set) Put(source string, c *Catalog, serve func(*Listing)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == nil {
		delete(s.bySrc, source)
	} else {
		c.source = source
		s.bySrc[source] = c
	}
	old := s.Current()
	b := &build{logger: s.logger, owner: map[string]string{},
		s: &Surface{resources: map[string]*Catalog{}, tmplOwner: map[string]*Catalog{}, prompts: map[string]Prompt{}, raw: map[string][]byte{}}}
	for _, src := range slices.Sorted(maps.Keys(s.bySrc)) {
		b.add(src, s.bySrc[src])
	}
	n, l := b.s, &b.l
	l.Templates = n.templates
	changed := func(kind string, v any) bool {
		raw, _ := json.Marshal(v)
		n.raw[kind] = raw
		return !bytes.Equal(old.raw[kind], raw)
	}
	n.resList = defs(l.Resources, func(r Resource) mcp.Resource { return r.Def })
	l.ResourcesChanged = changed("resources", n.resList)
	slices.SortFunc(n.resList, func(a, b mcp.Resource) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.URI, b.URI)) })
	n.tmplList = defs(l.Templates, func(t Template) mcp.ResourceTemplate { return t.Def })
	l.TemplatesChanged = changed("templates", n.tmplList)
	slices.SortFunc(n.tmplList, func(a, b mcp.ResourceTemplate) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.URITemplate.Raw(), b.URITemplate.Raw()))
	})
	l.PromptsChanged = changed("prompts", defs(l.Prompts, func(p Prompt) mcp.Prompt { return p.Def }))
	serve(l)
	s.current.Store(n)
}

// build is a surface being made from the sources' catalogs, in source
// order: what is listed, and which source listed each resource, template
// and prompt first.
type build struct {
	logger *slog.Logger
	s      *Surface
	l      Listing
	owner  map[string]string // kind:key → source
}

// taken reports whether a source before src listed kind key, which src's
// listing then loses, with a warning.
func (b *build) taken(kind, key, src string) bool {
	k := kind + ":" + key
	if first, dup := b.owner[k]; dup {
		b.logger.Warn("two sources list the same "+kind+"; serving the first's", "key", key, "served_from", first, "dropped_from", src)
		return true
	}
	b.owner[k] = src
	return false
}

// add adds source src's catalog cat: what it lists that no source before
// it did, skipping (with a warning) what cannot be read.
func (b *build) add(src string, cat *Catalog) {
	s := b.s
	for _, raw := range cat.Resources {
		var r mcp.Resource
		if err := json.Unmarshal(raw, &r); err != nil || r.URI == "" {
			b.logger.Warn("skipping a resource the front cannot read", "source", src, "error", err)
		} else if !b.taken("resource", r.URI, src) {
			s.resources[r.URI] = cat
			b.l.Resources = append(b.l.Resources, Resource{Def: r, Cat: cat})
		}
	}
	for _, raw := range cat.Templates {
		var t mcp.ResourceTemplate
		if err := json.Unmarshal(raw, &t); err != nil || t.URITemplate == nil {
			b.logger.Warn("skipping a resource template the front cannot read", "source", src, "error", err)
		} else if !b.taken("resource template", t.URITemplate.Raw(), src) {
			s.templates = append(s.templates, Template{Def: t, Cat: cat})
			s.tmplOwner[t.URITemplate.Raw()] = cat
		}
	}
	for _, cp := range cat.Prompts {
		var p mcp.Prompt
		if err := json.Unmarshal(cp.Raw, &p); err != nil {
			b.logger.Warn("skipping a prompt the front cannot read", "source", src, "prompt", cp.Orig, "error", err)
		} else if !b.taken("prompt", cp.Name, src) {
			p.Name = cp.Name
			s.prompts[cp.Name] = Prompt{Def: p, Orig: cp.Orig, Cat: cat}
			b.l.Prompts = append(b.l.Prompts, s.prompts[cp.Name])
		}
	}
}

// defs returns the definitions of the entries, in order.
func defs[E, D any](entries []E, def func(E) D) []D {
	out := make([]D, len(entries))
	for i, e := range entries {
		out[i] = def(e)
	}
	return out
}

// Owner returns the catalog of the source serving uri: the one listing
// it, else the first whose template matches it; nil when none does.
func (s *Surface) Owner(uri string) *Catalog {
	if c := s.resources[uri]; c != nil {
		return c
	}
	for _, t := range s.templates {
		if t.Def.URITemplate.Match(uri) != nil {
			return t.Cat
		}
	}
	return nil
}

// TemplateOwner returns the catalog of the source serving the resource
// template uriTemplate, or nil.
func (s *Surface) TemplateOwner(uriTemplate string) *Catalog { return s.tmplOwner[uriTemplate] }

// Prompt returns the prompt served as name.
func (s *Surface) Prompt(name string) (Prompt, bool) {
	p, ok := s.prompts[name]
	return p, ok
}

// page returns the page of list (sorted by key) after cursor (the key of
// the last entry of the page before, base64-encoded, as mcp-go's cursors
// are), at most PageSize entries, and the cursor of the next page ("" at
// the end).
func page[T any](list []T, cursor mcp.Cursor, key func(T) string) ([]T, mcp.Cursor) {
	start := 0
	if cursor != "" {
		if after, err := base64.StdEncoding.DecodeString(string(cursor)); err == nil {
			start, _ = slices.BinarySearchFunc(list, string(after), func(e T, k string) int {
				if key(e) <= k {
					return -1
				}
				return 1
			})
		}
	}
	end := min(start+PageSize, len(list))
	out := append(make([]T, 0, end-start), list[start:end]...)
	if end == len(list) {
		return out, ""
	}
	return out, mcp.Cursor(base64.StdEncoding.EncodeToString([]byte(key(list[end-1]))))
}
