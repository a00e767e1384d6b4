package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/gateway/internal/catalogtool"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// A source served with catalog: search (issues 15 and 30) is a catalog
// (package gateway/internal/catalogtool): its tools are registered but
// hidden from tools/list, which lists <source>__search, __describe and
// __call instead; with catalog.mode: search every tool is, behind
// toolgate_search, toolgate_describe and toolgate_call. The gateway's
// part is here: building catalogs, keeping tracking catalogs up to date
// with the registry, running <prefix>call through the pipeline, and
// keeping hidden tools out of the MCP front.

// Names of the gateway-wide catalog's meta-tools (catalog.mode: search):
// toolgate_search, toolgate_describe, toolgate_call.
const (
	gatewayCatalogPrefix = "toolgate_"
	// restCatalogName is the catalog of the rest tools as a group
	// (defaults.catalog: search): rest__search, rest__describe, rest__call.
	restCatalogName = "rest"
)

// catalogEnv is what g's catalogs need of it.
func (g *Gateway) catalogEnv() catalogtool.Env {
	return catalogtool.Env{
		Logger:    g.logger,
		Compile:   g.rest.Add,
		Replace:   g.replaceTools,
		Tool:      g.reg.Get,
		CheckArgs: checkArgs,
	}
}

// newCatalog starts the catalog of openapi source name, whose document is
// d, served by g; the gateway-wide catalog includes it.
func (g *Gateway) newCatalog(name string, d *openapi.Document) *catalogtool.Catalog {
	c := catalogtool.New(name, d, g.catalogEnv())
	if g.global != nil {
		g.global.Include(c)
	}
	return c
}

// trackingCatalogs builds, before any tool is registered, the catalogs
// that follow the registry (catalogtool.NewTracking) that cfg configures:
// the gateway-wide one (catalog.mode: search), the rest tools' and each
// upstream's with catalog: search; and returns their meta-tools, for New
// to register.
func (g *Gateway) trackingCatalogs(cfg *config.Config) []executors.Bound {
	var meta []executors.Bound
	if cfg.Catalog.Search() {
		g.global = catalogtool.NewTracking(catalogtool.TrackOptions{Prefix: gatewayCatalogPrefix, Member: g.inGatewayCatalog}, g.catalogEnv())
		g.always = cfg.Catalog.Always
		meta = append(meta, g.trackCatalog(g.global)...)
	}
	if cfg.Defaults.Catalog == config.CatalogSearch && len(cfg.Rest) > 0 {
		c := catalogtool.NewTracking(catalogtool.TrackOptions{Name: restCatalogName, Prefix: registry.Prefixed(restCatalogName, ""),
			Member: func(t *registry.Tool) bool { return strings.HasPrefix(t.Source, "rest:") }}, g.catalogEnv())
		g.restCatalog = c
		meta = append(meta, g.trackCatalog(c)...)
	}
	for _, u := range cfg.Upstreams {
		if !upstreamCatalog(cfg, u) {
			continue
		}
		source := "upstream:" + u.Name
		c := catalogtool.NewTracking(catalogtool.TrackOptions{Name: u.Name, Prefix: registry.Prefixed(u.Name, ""),
			Member: func(t *registry.Tool) bool { return t.Source == source }}, g.catalogEnv())
		if g.catalogs == nil {
			g.catalogs = map[string]*catalogtool.Catalog{}
		}
		g.catalogs[source] = c
		meta = append(meta, g.trackCatalog(c)...)
	}
	return meta
}

// upstreamCatalog reports whether u is served through a catalog under
// cfg.
func upstreamCatalog(cfg *config.Config, u config.Upstream) bool {
	return cmp.Or(u.Catalog, cfg.Defaults.Catalog) == config.CatalogSearch
}

// inGatewayCatalog reports whether the gateway-wide catalog holds t: every
// tool but the sources' catalogs' meta-tools and the OpenAPI catalogs'
// tools, which it reaches through those catalogs (Include).
func (g *Gateway) inGatewayCatalog(t *registry.Tool) bool {
	if strings.HasPrefix(t.Source, "catalog:") {
		return false
	}
	c, ok := g.catalogs[t.Source]
	return !ok || c.Source() == ""
}

// trackCatalog makes c, a tracking catalog, follow the registry from now
// on, holding the tools registered already, and returns its meta-tools
// (not registered). It is how a set of tools selected by a predicate is
// served through search, as catalog.mode: search serves every tool.
func (g *Gateway) trackCatalog(c *catalogtool.Catalog) []executors.Bound {
	g.catMu.Lock()
	defer g.catMu.Unlock()
	c.Track(g.reg.List(), nil)
	g.tracking = append(g.tracking, c)
	return c.Tools(catalogCallExec{g: g, c: c})
}

// trackChange gives the tracking catalogs a change of the registry.
func (g *Gateway) trackChange(c registry.Change) {
	g.catMu.Lock()
	defer g.catMu.Unlock()
	for _, cat := range g.tracking {
		cat.Track(c.Added, c.Removed)
	}
}

// hiddenBy returns the catalog whose meta-tools serve t in place of
// tools/list, or nil when t is listed: with catalog.mode: search, every
// tool but the meta-tools and catalog.always's is behind toolgate_call;
// otherwise a tool of a source with catalog: search is behind its
// source's.
func (g *Gateway) hiddenBy(t *registry.Tool) *catalogtool.Catalog {
	if g.global != nil && !g.global.IsMeta(t.Name) && !g.alwaysListed(t.Name) {
		return g.global
	}
	if c, ok := g.catalogs[t.Source]; ok {
		return c
	}
	if g.restCatalog != nil && strings.HasPrefix(t.Source, "rest:") {
		return g.restCatalog
	}
	return nil
}

// alwaysListed reports whether catalog.always lists the tool called name.
func (g *Gateway) alwaysListed(name string) bool {
	for _, glob := range g.always {
		if ok, _ := path.Match(glob, name); ok {
			return true
		}
	}
	return false
}

// catalogCallExec runs a catalog's <source>__call. It is re-entrant, like
// toolgate_batch: the pipeline gives it its Call in its context, takes no
// slot for it (the inner call takes its own) and the inner call goes
// through the whole pipeline, as the outer call's principal, in its
// session and thread.
type catalogCallExec struct {
	g *Gateway
	c *catalogtool.Catalog
}

func (catalogCallExec) reentrant() {}

var _ reentrantExecutor = catalogCallExec{}

// Execute runs the named tool through the pipeline and returns that
// call's result.
func (x catalogCallExec) Execute(ctx context.Context, ec executors.Call) (executors.Result, error) {
	g := x.g
	outer, ok := callFrom(ctx)
	if !ok {
		return executors.Result{}, retry.Errorf(retry.Internal, "%s ran outside the pipeline", x.c.MetaName(catalogtool.Call))
	}
	name, _ := ec.Args["name"].(string)
	tool, err := x.c.Resolve(name, outer.ident)
	if err != nil {
		return executors.Result{}, err
	}
	r, err := g.lookup(tool)
	if err != nil {
		return executors.Result{}, retry.Wrap(retry.NotFound, "", err)
	}
	var raw json.RawMessage
	if a, ok := ec.Args["arguments"]; ok && a != nil {
		if raw, err = json.Marshal(a); err != nil {
			return executors.Result{}, retry.Wrap(retry.Internal, "reading the arguments", err)
		}
	}
	c := &Call{Name: tool, route: r, Raw: raw, Meta: outer.Meta, Principal: outer.Principal, ident: outer.ident,
		Session: outer.Session, Thread: outer.Thread, Progress: ec.Progress}
	res, err := g.handle(ctx, c)
	if err != nil {
		res = errorResult(err)
	}
	return executors.Result(*res), nil
}

// hiddenError is the answer to an MCP client that calls t, a tool served
// through a catalog, by name ([catalogtool.Catalog.HiddenError]).
func (g *Gateway) hiddenError(name string, t *registry.Tool) error {
	return g.hiddenBy(t).HiddenError(name, t)
}

// visibleNotFound returns err, a name resolution's error for an MCP
// client, without the hidden tools it would suggest: each becomes the
// search tool of the catalog it is behind.
func (g *Gateway) visibleNotFound(err error) error {
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || (len(g.catalogs) == 0 && g.global == nil && g.restCatalog == nil) {
		return err
	}
	v := &registry.NotFoundError{Name: nf.Name, Available: -1, Ambiguous: nf.Ambiguous}
	for _, s := range nf.Suggestions {
		if t, ok := g.reg.Get(s); ok {
			if c := g.hiddenBy(t); c != nil {
				s = c.MetaName(catalogtool.Search)
			}
		}
		if !slices.Contains(v.Suggestions, s) {
			v.Suggestions = append(v.Suggestions, s)
		}
	}
	v.Ambiguous = v.Ambiguous && len(v.Suggestions) > 1
	return v
}

// replaceTools swaps registered tools for new definitions of the same
// names and sources, keeping their executors (a catalog's tools, built or
// put back to their stubs).
func (g *Gateway) replaceTools(ts ...registry.Tool) error {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	return g.reg.Replace(ts...)
}
