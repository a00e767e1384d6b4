package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/catalogtool"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// A source served with catalog: search (issues 15 and 30) is a catalog
// (package gateway/internal/catalogtool, whose Set holds them all and
// says which hides which tool): its tools are registered but hidden from
// tools/list, which lists <source>__search, __describe and __call
// instead; with catalog.mode: search every tool is, behind
// toolgate_search, toolgate_describe and toolgate_call. The gateway's
// part is here: building the catalogs the configuration asks for, and
// running <prefix>call through the pipeline.

// Names of the gateway-wide catalog's meta-tools (catalog.mode: search):
// toolgate_search, toolgate_describe, toolgate_call.
const (
	gatewayCatalogPrefix = "toolgate_"
	// restCatalogName is the catalog of the rest tools as a group
	// (defaults.catalog: search): rest__search, rest__describe, rest__call.
	restCatalogName = "rest"
)

// listing indexes what a front lists (route.hidden): 0 at a front that
// lists each tool, 1 at one in search mode, which lists the gateway-wide
// catalog's meta-tools in place of the tools.
func listing(search bool) int {
	if search {
		return 1
	}
	return 0
}

// isGatewayMeta reports whether name is one of the gateway-wide catalog's
// meta-tools.
func isGatewayMeta(name string) bool {
	switch name {
	case gatewayCatalogPrefix + catalogtool.Search, gatewayCatalogPrefix + catalogtool.Describe, gatewayCatalogPrefix + catalogtool.Call:
		return true
	}
	return false
}

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

// trackingCatalogs starts g's catalogs, before any tool is registered,
// with those that follow the registry that cfg configures: the
// gateway-wide one (catalog.mode: search), the rest tools' and each
// upstream's with catalog: search; and returns their meta-tools, for New
// to register.
func (g *Gateway) trackingCatalogs(cfg *config.Config) []executors.Bound {
	g.catalogs = catalogtool.NewSet(g.catalogEnv())
	var cats []*catalogtool.Catalog
	if cfg.Catalog.Search() || slices.ContainsFunc(cfg.Endpoints, func(e config.Endpoint) bool { return e.Search(cfg.Catalog) }) {
		cats = append(cats, g.catalogs.Global(gatewayCatalogPrefix, cfg.Catalog.Always, g.reg.List()))
	}
	if cfg.Defaults.Catalog == config.CatalogSearch && len(cfg.Rest) > 0 {
		cats = append(cats, g.catalogs.Group(catalogtool.TrackOptions{Name: restCatalogName, Prefix: registry.Prefixed(restCatalogName, ""),
			Member: func(t *registry.Tool) bool { return strings.HasPrefix(t.Source, "rest:") }}, "", g.reg.List()))
	}
	for _, u := range cfg.Upstreams {
		if !upstreamCatalog(cfg, u) {
			continue
		}
		source := "upstream:" + u.Name
		cats = append(cats, g.catalogs.Group(catalogtool.TrackOptions{Name: u.Name, Prefix: registry.Prefixed(u.Name, ""),
			Member: func(t *registry.Tool) bool { return t.Source == source }}, source, g.reg.List()))
	}
	var meta []executors.Bound
	for _, c := range cats {
		meta = append(meta, c.Tools(catalogCallExec{g: g, c: c})...)
	}
	return meta
}

// upstreamCatalog reports whether u is served through a catalog under
// cfg.
func upstreamCatalog(cfg *config.Config, u config.Upstream) bool {
	return cmp.Or(u.Catalog, cfg.Defaults.Catalog) == config.CatalogSearch
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
	outer, ok := callFrom(ctx)
	if !ok {
		return executors.Result{}, retry.Errorf(retry.Internal, "%s ran outside the pipeline", x.c.MetaName(catalogtool.Call))
	}
	name, _ := ec.Args["name"].(string)
	tool, err := x.c.Resolve(name, outer.ident)
	if err != nil {
		return executors.Result{}, err
	}
	r, err := x.g.lookup(tool)
	if err != nil {
		return executors.Result{}, retry.Wrap(retry.NotFound, "", err)
	}
	var raw json.RawMessage
	if a, ok := ec.Args["arguments"]; ok && a != nil {
		if raw, err = json.Marshal(a); err != nil {
			return executors.Result{}, retry.Wrap(retry.Internal, "reading the arguments", err)
		}
	}
	c := innerCall(outer, tool, r, raw)
	c.Meta, c.Progress = outer.Meta, ec.Progress
	res, err := x.g.handle(ctx, c)
	if err != nil {
		res = errorResult(err)
	}
	return executors.Result(*res), nil
}

// replaceTools swaps registered tools for new definitions of the same
// names and sources, keeping their executors (a catalog's tools, built or
// put back to their stubs).
func (g *Gateway) replaceTools(ts ...registry.Tool) error {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	return g.reg.Replace(ts...)
}
