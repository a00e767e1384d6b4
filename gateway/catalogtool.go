package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/gateway/internal/catalogtool"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// An OpenAPI source served with catalog: search (issue 15) is a catalog
// (package gateway/internal/catalogtool): its tools are registered but
// hidden from tools/list, which lists <source>__search, __describe and
// __call instead. The gateway's part is here: building catalogs, running
// <source>__call through the pipeline, and keeping hidden tools out of
// the MCP front.

// newCatalog starts the catalog of openapi source name, whose document is
// d, served by g.
func (g *Gateway) newCatalog(name string, d *openapi.Document) *catalogtool.Catalog {
	return catalogtool.New(name, d, catalogtool.Env{
		Logger:    g.logger,
		Compile:   g.rest.Add,
		Replace:   g.replaceTools,
		Tool:      g.reg.Get,
		CheckArgs: checkArgs,
	})
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

// hiddenSource reports whether tools of source are served through a
// catalog (and so hidden from tools/list).
func (g *Gateway) hiddenSource(source string) bool {
	_, ok := g.catalogs[source]
	return ok
}

// hiddenError is the answer to an MCP client that calls t, a tool served
// through a catalog, by name ([catalogtool.Catalog.HiddenError]).
func (g *Gateway) hiddenError(name string, t *registry.Tool) error {
	return g.catalogs[t.Source].HiddenError(name, t)
}

// visibleNotFound returns err, a name resolution's error for an MCP
// client, without the hidden tools it would suggest: each becomes its
// catalog's search tool.
func (g *Gateway) visibleNotFound(err error) error {
	nf, ok := errors.AsType[*registry.NotFoundError](err)
	if !ok || len(g.catalogs) == 0 {
		return err
	}
	v := &registry.NotFoundError{Name: nf.Name, Available: -1, Ambiguous: nf.Ambiguous}
	for _, s := range nf.Suggestions {
		if t, ok := g.reg.Get(s); ok && g.hiddenSource(t.Source) {
			s = g.catalogs[t.Source].MetaName(catalogtool.Search)
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
