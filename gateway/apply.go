package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/hooks"
	"github.com/toolgate/toolgate/gateway/internal/reloadplan"
	"github.com/toolgate/toolgate/gateway/internal/restsource"
	"github.com/toolgate/toolgate/gateway/internal/upstreamset"
	"github.com/toolgate/toolgate/internal/auth"
)

// Applied is what [Gateway.Apply] changed, each source named as its tools'
// registry source ("rest:weather", "openapi:petstore", "upstream:fs"), and
// in Changed "auth" when the static tokens or admins changed, "hooks" when
// the hooks did, and each other setting applied live by its key:
// "guards", "defaults", "threads", "batch_tool", "auth.max_sessions",
// "auth.max_instances".
type Applied struct {
	Added, Changed, Removed []string
	// Restart lists the settings that differ from those the gateway runs
	// with but take effect only when toolgate restarts, as key paths
	// ("server.listen", "auth", "cluster"); they keep their old values.
	Restart []string
}

// Apply brings the gateway's sources to cfg, a configuration loaded and
// validated by package config: the rest tools, OpenAPI sources and
// upstreams that cfg adds, changes or removes are added, replaced or
// removed; the others, and every session, thread and call in flight, are
// left as they are (an unchanged upstream keeps its process and
// sessions). An OpenAPI source whose settings are unchanged is reloaded
// when its document changed. The static tokens of the auth section and
// its admins are replaced too: a token removed is refused from the next
// request on, and a principal's sessions see and may call only what its
// new permissions allow. Clients get notifications/tools/list_changed for
// each source changed and when the tokens did. Hooks are replaced too:
// calls that have started keep the hooks they started with. So are the
// guards, the defaults but catalog (timeout, retry, breakers, budgets,
// concurrency limits), threads, batch_tool and auth's session and
// instance caps (live.go): calls that start after Apply returns run under
// them, calls in flight keep what they started with.
//
// Everything cfg asks for is built before anything changes: a problem
// (each at file:line:col) leaves the gateway as it was. Settings that
// cannot change while serving are listed in [Applied.Restart], not
// applied. Builtin tools are registered by their package: the caller
// applies cfg.Builtin with [Gateway.Unregister] and the builtin package.
// Apply calls are serialised with each other and with the Add and Remove
// methods of sources.
func (g *Gateway) Apply(cfg *config.Config) (*Applied, error) {
	g.srcs.mu.Lock()
	defer g.srcs.mu.Unlock()
	p, err := g.planApply(cfg)
	if err != nil {
		return nil, err
	}
	return p.applied, p.run(g)
}

// applyPlan is an Apply's difference, built and ready to serve.
type applyPlan struct {
	applied                     *Applied
	auth                        *auth.Authenticator // for the new tokens, or nil when they did not change
	authCfg                     config.Auth         // the auth section auth was built from
	hooks                       []*hooks.Hook       // the new hooks, when hooksChanged
	hooksChanged                bool
	hookCfg                     []config.Hook
	settings                    *liveSettings // the new live settings (live.go), or nil when they did not change
	authCaps                    bool          // auth's session and instance caps are live: the rest of auth is unchanged
	dropREST, dropOpenAPI, drop []string      // names removed: rest tools, OpenAPI sources, upstreams
	rest                        []restPut
	openapi                     []openapiPut
	ups                         []*upstreamset.Upstream
}

type restPut struct {
	t  config.RESTTool
	bs []executors.Bound
}

type openapiPut struct {
	o  config.OpenAPISource
	bs []executors.Bound
}

// planApply builds what cfg adds or changes and lists what it removes,
// changing nothing; or returns every problem. Callers hold srcs.mu.
func (g *Gateway) planApply(cfg *config.Config) (*applyPlan, error) {
	p := &applyPlan{applied: &Applied{Restart: reloadplan.Restart(g.cfg, cfg)}}
	g.planAuth(cfg, p)
	g.planSettings(cfg, p)
	errs := append(restsource.NameErrors(cfg), upstreamNameErrors(cfg)...)
	if len(errs) > 0 {
		return nil, joinProblems(errs...)
	}
	errs = append(errs, g.planREST(cfg, p)...)
	errs = append(errs, g.planOpenAPI(cfg, p)...)
	if err := g.planHooks(cfg, p); err != nil {
		errs = append(errs, err)
	}
	if err := g.planUpstreams(cfg, p); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		for _, u := range p.ups {
			_ = u.Manager.Close() // built, never started
		}
		return nil, joinProblems(errs...)
	}
	return p, nil
}

// note records source as added or changed.
func (a *Applied) note(source string, existed bool) {
	if existed {
		a.Changed = append(a.Changed, source)
	} else {
		a.Added = append(a.Added, source)
	}
}

// planAuth builds the authenticator of cfg's tokens when they changed and
// the rest of the auth section did not, and takes them and the caps
// (applied by planSettings) off the settings that need a restart.
// Per-principal rate buckets start full again.
func (g *Gateway) planAuth(cfg *config.Config, p *applyPlan) {
	if g.auth == nil || !reloadplan.AuthLive(&g.cfg.Auth, &cfg.Auth) {
		return
	}
	p.authCaps = true
	p.applied.Restart = reloadplan.WithoutLiveAuth(p.applied.Restart)
	if !reloadplan.TokensChanged(&g.srcs.auth, &cfg.Auth) {
		return
	}
	p.authCfg = cfg.Auth
	p.auth = auth.New(&p.authCfg, &auth.Options{Logger: g.logger, Bucket: g.redis.Buckets()})
	p.applied.Changed = append(p.applied.Changed, "auth")
}

// planHooks builds cfg's hooks when they changed. Calls that have started
// keep the hooks they started with.
func (g *Gateway) planHooks(cfg *config.Config, p *applyPlan) error {
	if reloadplan.Same(g.srcs.hooks, cfg.Hooks) {
		return nil
	}
	set, err := g.newHooks(cfg)
	if err != nil {
		return err
	}
	p.hooks, p.hooksChanged, p.hookCfg = set, true, cfg.Hooks
	p.applied.Changed = append(p.applied.Changed, "hooks")
	return nil
}

// planREST builds the rest tools cfg adds or changes.
func (g *Gateway) planREST(cfg *config.Config, p *applyPlan) []error {
	var errs []error
	changes, removed := reloadplan.Diff(g.srcs.rest, cfg.Rest, func(t config.RESTTool) string { return t.Name }, reloadplan.Same)
	for _, c := range changes {
		bs, err := g.restBound(cfg, c.Index)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.rest = append(p.rest, restPut{c.New, bs})
		p.applied.note("rest:"+c.New.Name, c.Existed)
	}
	for _, name := range removed {
		p.dropREST = append(p.dropREST, name)
		p.applied.Removed = append(p.applied.Removed, "rest:"+name)
	}
	return errs
}

// planOpenAPI builds the OpenAPI sources cfg adds or changes, and those
// whose document changed. A source served through a catalog is fixed
// while serving: a change to one is listed as needing a restart.
func (g *Gateway) planOpenAPI(cfg *config.Config, p *applyPlan) []error {
	var errs []error
	same := func(old, o config.OpenAPISource) bool {
		return reloadplan.Same(old, o) && !g.restLoader().DocChanged(g.root, o)
	}
	changes, removed := reloadplan.Diff(g.srcs.openapi, cfg.OpenAPI, func(o config.OpenAPISource) string { return o.Name }, same)
	for _, c := range changes {
		o := c.New
		if g.catalogSource(cfg, o) || (c.Existed && g.catalogSource(g.cfg, c.Old)) {
			p.applied.Restart = append(p.applied.Restart, fmt.Sprintf("openapi[%d] (%s, catalog: search)", c.Index, o.Name))
			continue
		}
		bs, err := g.openapiBound(cfg, c.Index)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.openapi = append(p.openapi, openapiPut{o, bs})
		p.applied.note("openapi:"+o.Name, c.Existed)
	}
	for _, name := range removed {
		if g.catalogSource(g.cfg, g.srcs.openapi[name]) {
			p.applied.Restart = append(p.applied.Restart, fmt.Sprintf("openapi (%s removed, catalog: search)", name))
			continue
		}
		p.dropOpenAPI = append(p.dropOpenAPI, name)
		p.applied.Removed = append(p.applied.Removed, "openapi:"+name)
	}
	return errs
}

// catalogSource reports whether o is served through a catalog under cfg.
func (g *Gateway) catalogSource(cfg *config.Config, o config.OpenAPISource) bool {
	return cmp.Or(o.Catalog, cfg.Defaults.Catalog) == config.CatalogSearch
}

// planUpstreams builds the upstreams cfg adds or changes.
func (g *Gateway) planUpstreams(cfg *config.Config, p *applyPlan) error {
	ups, err := g.newUpstreams(cfg)
	if err != nil {
		return err
	}
	cur := g.ups.Configured()
	cfgs := make([]config.Upstream, len(ups))
	for i, u := range ups {
		cfgs[i] = u.Config
	}
	changes, removed := reloadplan.Diff(cur, cfgs, func(u config.Upstream) string { return u.Name }, upstreamset.Same)
	keep := make([]bool, len(ups))
	for _, c := range changes {
		// Catalogs are fixed by New: an upstream may change, but not
		// move in or out of one.
		if was := c.Existed && upstreamCatalog(g.cfg, c.Old); was != upstreamCatalog(cfg, c.New) {
			p.applied.Restart = append(p.applied.Restart, fmt.Sprintf("upstreams (%s, catalog: search)", c.New.Name))
			continue
		}
		keep[c.Index] = true
		p.ups = append(p.ups, ups[c.Index])
		p.applied.note("upstream:"+c.New.Name, c.Existed)
	}
	for i, u := range ups {
		if !keep[i] {
			_ = u.Manager.Close() // built, never started: the running one stays, or a restart is needed
		}
	}
	for _, name := range removed {
		if upstreamCatalog(g.cfg, cur[name]) {
			p.applied.Restart = append(p.applied.Restart, fmt.Sprintf("upstreams (%s removed, catalog: search)", name))
			continue
		}
		p.drop = append(p.drop, name)
		p.applied.Removed = append(p.applied.Removed, "upstream:"+name)
	}
	return nil
}

// run serves what p built: removals first, so that a name can move from
// one source to another. A tool the registry refuses (its name taken by a
// tool an upstream listed) is reported; the rest is applied.
func (p *applyPlan) run(g *Gateway) error {
	if p.auth != nil {
		// Every request from now on is checked against the new tokens;
		// each session's next tools/list is filtered by its principal's
		// new permissions, and every call is checked by them.
		g.authLive.Store(p.auth)
		g.srcs.auth = p.authCfg
		for _, f := range g.fronts() {
			f.ToolsChanged()
		}
	}
	for _, n := range p.drop {
		g.dropUpstream(n)
	}
	for _, n := range p.dropREST {
		g.dropREST(n)
	}
	for _, n := range p.dropOpenAPI {
		g.dropOpenAPI(n)
	}
	for _, u := range p.ups {
		g.putUpstream(u)
	}
	if p.hooksChanged {
		g.setHooks(p.hooks)
		g.srcs.hooks = p.hookCfg
	}
	var errs []error
	if p.settings != nil {
		if err := g.setSettings(g.settings(), p.settings); err != nil {
			errs = append(errs, fmt.Errorf("batch_tool: %w", err))
		}
	}
	for _, r := range p.rest {
		if err := g.putREST(r.t, r.bs); err != nil {
			errs = append(errs, fmt.Errorf("rest tool %q: %w", r.t.Name, err))
		}
	}
	for _, o := range p.openapi {
		if err := g.putOpenAPI(o.o, o.bs); err != nil {
			errs = append(errs, fmt.Errorf("openapi source %q: %w", o.o.Name, err))
		}
	}
	return errors.Join(errs...)
}

// RecordReload counts a configuration reload in
// toolgate_config_reloads_total and shows its outcome on /readyz: err nil
// is a reload applied (a, what Apply returned, may be nil), otherwise the
// problems that kept the configuration before it serving (a joined error
// counts each). While the last reload failed, /readyz says degraded. The
// problems themselves are the caller's to log.
func (g *Gateway) RecordReload(a *Applied, err error) {
	var restart []string
	if a != nil {
		restart = a.Restart
	}
	st := reloadplan.NewStatus(time.Now(), restart, err)
	g.metrics.Reload(st.Result)
	g.lastReload.Store(st)
}
