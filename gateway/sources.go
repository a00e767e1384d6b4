package gateway

import (
	"sync"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/restsource"
	"github.com/toolgate/toolgate/gateway/internal/upstreamset"
)

// Sources added and removed while the gateway serves: the embedding API
// (issue 29 item 9) and the mechanism a configuration reload applies its
// difference with ([Gateway.Apply]). A source is a REST tool (registry
// source "rest:<name>"), an OpenAPI document ("openapi:<name>") or an
// upstream MCP server ("upstream:<name>"). Adding one whose name is taken
// replaces it; every change reaches connected clients as
// notifications/tools/list_changed (and resources/prompts list_changed
// for an upstream's catalog). Calls in flight keep the executor they
// started with.

// sourceSet is what the gateway serves of the rest and openapi sections,
// as configured, to tell a changed source from an unchanged one.
type sourceSet struct {
	// mu serialises adding, removing and applying sources, and guards the
	// maps.
	mu      sync.Mutex
	rest    map[string]config.RESTTool
	openapi map[string]config.OpenAPISource
	auth    config.Auth   // the tokens and admins in force (apply.go)
	hooks   []config.Hook // the hooks in force (apply.go)
}

// goConfig is the configuration a source added from Go is built in: the
// gateway's defaults, no positions and no secrets from the environment.
func (g *Gateway) goConfig() *config.Config {
	return &config.Config{Source: "(Go)", Defaults: g.settings().defaults}
}

// SkippedOperation is an operation of an OpenAPI source that made no
// tool, with why.
type SkippedOperation = restsource.SkippedOperation

// SkippedOperations returns the operations of the OpenAPI sources that
// made no tool, in source then document order (toolgate tools --skipped).
func (g *Gateway) SkippedOperations() []SkippedOperation { return g.openapi.Skipped() }

// SourceProblems returns the problems of the OpenAPI sources that
// toolgate started without (their document could not be read or used),
// each placed in the configuration file as file:line:col. New fails
// instead when such a source is the only source of tools; toolgate
// validate reports these as errors.
func (g *Gateway) SourceProblems() []error { return g.openapi.Problems() }

// restLoader loads g's rest and openapi sources (package restsource).
func (g *Gateway) restLoader() *restsource.Loader {
	return &restsource.Loader{
		Compile:    g.rest.Add,
		NewCatalog: g.catalogs.OpenAPI,
		Bound:      g.res.SetRESTURL,
		Logger:     g.logger,
		State:      &g.openapi,
	}
}

// restTools compiles the config's rest and openapi sections into REST
// tools bound to their executors, and the meta-tools of the sources
// served through a catalog, for the caller to register in one batch.
// Every problem is reported at once, each as file:line:col: path: message.
func (g *Gateway) restTools(cfg *config.Config) ([]executors.Bound, error) {
	bound, cats, problems := g.restLoader().All(g.root, cfg)
	if len(problems) > 0 {
		return nil, joinProblems(problems...)
	}
	for _, c := range cats {
		g.catalogs.Serve(c)
		bound = append(bound, c.Tools(catalogCallExec{g: g, c: c})...)
	}
	return bound, nil
}

// AddREST adds the REST tool t, written as in the configuration's rest
// section, or replaces the REST tool of the same name (a call of the old
// one in flight finishes). Its problems are returned at once, each naming
// its field; an error leaves the gateway unchanged.
func (g *Gateway) AddREST(t config.RESTTool) error {
	c := g.goConfig()
	c.Rest = []config.RESTTool{t}
	g.srcs.mu.Lock()
	defer g.srcs.mu.Unlock()
	bs, err := g.restBound(c, 0)
	if err != nil {
		return err
	}
	return g.putREST(t, bs)
}

// RemoveREST removes the REST tool called name, added by [Gateway.AddREST]
// or the configuration, and reports whether there was one.
func (g *Gateway) RemoveREST(name string) bool {
	g.srcs.mu.Lock()
	defer g.srcs.mu.Unlock()
	return g.dropREST(name)
}

// AddUpstream adds the upstream MCP server u, written as in the
// configuration's upstreams section, or replaces the upstream of the same
// name: its process and sessions end and the new one starts. It connects
// at once when [Gateway.StartUpstreams] has been called, else with it; its
// tools reach clients as it lists them. An error leaves the gateway
// unchanged.
func (g *Gateway) AddUpstream(u config.Upstream) error {
	c := g.goConfig()
	c.Upstreams = []config.Upstream{u}
	g.srcs.mu.Lock()
	defer g.srcs.mu.Unlock()
	ups, err := g.newUpstreams(c)
	if err != nil {
		return err
	}
	g.putUpstream(ups[0])
	return nil
}

// RemoveUpstream stops the upstream MCP server called name (its process
// exits, its calls in flight end with class unavailable) and removes its
// tools, resources and prompts. It reports whether there was one.
func (g *Gateway) RemoveUpstream(name string) bool {
	g.srcs.mu.Lock()
	defer g.srcs.mu.Unlock()
	return g.dropUpstream(name)
}

// restBound builds the tool of cfg.Rest[i], or returns its problems.
func (g *Gateway) restBound(cfg *config.Config, i int) ([]executors.Bound, error) {
	bs, problems := g.restLoader().REST(cfg, i)
	return bs, joinProblems(problems...)
}

// putREST serves bs, the tool of t, in place of any before it. Callers
// hold srcs.mu.
func (g *Gateway) putREST(t config.RESTTool, bs []executors.Bound) error {
	source := "rest:" + t.Name
	g.res.SetPolicy(source, t.Retry)
	g.caches.Set(source, t.Cache)
	if err := g.setSourceTools(source, bs); err != nil {
		return err
	}
	if g.srcs.rest == nil {
		g.srcs.rest = map[string]config.RESTTool{}
	}
	g.srcs.rest[t.Name] = t
	return nil
}

// dropREST removes the REST tool called name. Callers hold srcs.mu.
func (g *Gateway) dropREST(name string) bool {
	source := "rest:" + name
	_, had := g.srcs.rest[name]
	delete(g.srcs.rest, name)
	if err := g.setSourceTools(source, nil); err != nil {
		g.logger.Error("removing a REST tool", "tool", name, "error", err)
	}
	g.res.DropSource(source)
	g.caches.Set(source, nil)
	return had
}

// putUpstream serves u in place of the upstream of its name, which is
// closed first (with its tools) so that the two never run together.
// Callers hold srcs.mu.
func (g *Gateway) putUpstream(u *upstreamset.Upstream) {
	g.dropUpstream(u.Config.Name)
	g.reg.ReserveNamespaces(u.Config.Name)
	g.res.SetPolicy("upstream:"+u.Config.Name, u.Config.Retry)
	g.caches.SetUpstream(u.Config)
	g.ups.Put(u)
}

// dropUpstream closes the upstream called name and removes its tools and
// catalog. Callers hold srcs.mu.
func (g *Gateway) dropUpstream(name string) bool {
	u := g.ups.Take(name)
	if u == nil {
		return false
	}
	_ = u.Manager.Close() // its supervisor has stopped: it lists no more tools
	source := "upstream:" + name
	if err := g.setSourceTools(source, nil); err != nil {
		g.logger.Error("removing an upstream's tools", "upstream", name, "error", err)
	}
	for _, f := range g.fronts() {
		f.SetCatalog(source, nil)
	}
	g.res.DropSource(source)
	g.caches.Set(source, nil)
	g.metrics.ForgetUpstream(name)
	return true
}

// openapiBound builds the tools of cfg.OpenAPI[i], reading its document
// again, or returns its problems.
func (g *Gateway) openapiBound(cfg *config.Config, i int) ([]executors.Bound, error) {
	bs, problems := g.restLoader().OpenAPI(g.root, cfg, i)
	return bs, joinProblems(problems...)
}

// putOpenAPI serves bs, the tools of o, in place of any before them.
// Callers hold srcs.mu.
func (g *Gateway) putOpenAPI(o config.OpenAPISource, bs []executors.Bound) error {
	source := "openapi:" + o.Name
	g.reg.ReserveNamespaces(o.Name)
	g.res.SetPolicy(source, o.Retry)
	g.caches.Set(source, o.Cache)
	if err := g.setSourceTools(source, bs); err != nil {
		return err
	}
	if g.srcs.openapi == nil {
		g.srcs.openapi = map[string]config.OpenAPISource{}
	}
	g.srcs.openapi[o.Name] = o
	return nil
}

// dropOpenAPI removes the tools of the OpenAPI source called name.
// Callers hold srcs.mu.
func (g *Gateway) dropOpenAPI(name string) {
	source := "openapi:" + name
	delete(g.srcs.openapi, name)
	if err := g.setSourceTools(source, nil); err != nil {
		g.logger.Error("removing an OpenAPI source's tools", "source", name, "error", err)
	}
	g.openapi.Forget(name)
	g.res.DropSource(source)
	g.caches.Set(source, nil)
}

// recordSources notes the rest and openapi sources New served from cfg,
// for the first [Gateway.Apply] to compare with.
func (g *Gateway) recordSources(cfg *config.Config) {
	g.srcs.mu.Lock()
	defer g.srcs.mu.Unlock()
	g.srcs.rest = map[string]config.RESTTool{}
	for _, t := range cfg.Rest {
		g.srcs.rest[t.Name] = t
	}
	g.srcs.openapi = map[string]config.OpenAPISource{}
	for _, o := range cfg.OpenAPI {
		g.srcs.openapi[o.Name] = o
	}
	g.srcs.auth = cfg.Auth
	g.srcs.hooks = cfg.Hooks
}
