package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/hooks"
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
	p := &applyPlan{applied: &Applied{Restart: restartNeeded(g.cfg, cfg)}}
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

// liveAuth are the keys of the auth section a reload applies: the static
// tokens, with their permissions and rates, who is an admin, and the caps
// of one principal's sessions and instances. The rest (OAuth, rate_scope,
// switching authentication on or off) needs a restart.
var liveAuth = []string{"auth.tokens", "auth.admins", "auth.max_sessions", "auth.max_instances"}

// planAuth builds the authenticator of cfg's tokens when they changed and
// the rest of the auth section did not, and takes them and the caps
// (applied by planSettings) off the settings that need a restart.
// Per-principal rate buckets start full again.
func (g *Gateway) planAuth(cfg *config.Config, p *applyPlan) {
	if g.auth == nil || !cfg.Auth.Enabled() {
		return // switching authentication on or off needs a restart
	}
	rest := func(a config.Auth) config.Auth {
		a.Tokens, a.Admins, a.MaxSessions, a.MaxInstances = nil, nil, 0, 0
		return a
	}
	if !sameSection(rest(g.cfg.Auth), rest(cfg.Auth)) {
		return
	}
	p.authCaps = true
	if p.applied.Restart = slices.DeleteFunc(p.applied.Restart, func(k string) bool { return slices.Contains(liveAuth, k) }); len(p.applied.Restart) == 0 {
		p.applied.Restart = nil
	}
	cur := g.srcs.auth
	if sameSection(cur.Tokens, cfg.Auth.Tokens) && sameSection(cur.Admins, cfg.Auth.Admins) {
		return
	}
	p.authCfg = cfg.Auth
	p.auth = auth.New(&p.authCfg, &auth.Options{Logger: g.logger, Bucket: g.redis.Buckets()})
	p.applied.Changed = append(p.applied.Changed, "auth")
}

// planHooks builds cfg's hooks when they changed. Calls that have started
// keep the hooks they started with.
func (g *Gateway) planHooks(cfg *config.Config, p *applyPlan) error {
	if sameSection(g.srcs.hooks, cfg.Hooks) {
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
	seen := map[string]bool{}
	for i, t := range cfg.Rest {
		seen[t.Name] = true
		old, ok := g.srcs.rest[t.Name]
		if ok && sameSection(old, t) {
			continue
		}
		bs, err := g.restBound(cfg, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.rest = append(p.rest, restPut{t, bs})
		p.applied.note("rest:"+t.Name, ok)
	}
	for _, name := range sortedKeys(g.srcs.rest) {
		if !seen[name] {
			p.dropREST = append(p.dropREST, name)
			p.applied.Removed = append(p.applied.Removed, "rest:"+name)
		}
	}
	return errs
}

// planOpenAPI builds the OpenAPI sources cfg adds or changes, and those
// whose document changed. A source served through a catalog is fixed
// while serving: a change to one is listed as needing a restart.
func (g *Gateway) planOpenAPI(cfg *config.Config, p *applyPlan) []error {
	var errs []error
	seen := map[string]bool{}
	for i, o := range cfg.OpenAPI {
		seen[o.Name] = true
		old, ok := g.srcs.openapi[o.Name]
		if ok && sameSection(old, o) && !g.restLoader().DocChanged(g.root, o) {
			continue
		}
		if g.catalogSource(cfg, o) || (ok && g.catalogSource(g.cfg, old)) {
			p.applied.Restart = append(p.applied.Restart, fmt.Sprintf("openapi[%d] (%s, catalog: search)", i, o.Name))
			continue
		}
		bs, err := g.openapiBound(cfg, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.openapi = append(p.openapi, openapiPut{o, bs})
		p.applied.note("openapi:"+o.Name, ok)
	}
	for _, name := range sortedKeys(g.srcs.openapi) {
		if seen[name] {
			continue
		}
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
	for _, u := range ups {
		old, ok := cur[u.Config.Name]
		delete(cur, u.Config.Name)
		if ok && upstreamset.Same(old, u.Config) {
			_ = u.Manager.Close() // built, never started: the running one stays
			continue
		}
		// Catalogs are fixed by New: an upstream may change, but not
		// move in or out of one.
		if was := ok && upstreamCatalog(g.cfg, old); was != upstreamCatalog(cfg, u.Config) {
			_ = u.Manager.Close()
			p.applied.Restart = append(p.applied.Restart, fmt.Sprintf("upstreams (%s, catalog: search)", u.Config.Name))
			continue
		}
		p.ups = append(p.ups, u)
		p.applied.note("upstream:"+u.Config.Name, ok)
	}
	for _, name := range sortedKeys(cur) {
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

// liveSections are the configuration's sections a reload applies whole;
// liveKeys (live.go) the keys of those it applies in part. Every other
// setting takes effect on restart.
var liveSections = map[string]bool{"builtin": true, "rest": true, "openapi": true, "upstreams": true, "hooks": true,
	"guards": true, "threads": true, "batch_tool": true}

// restartNeeded lists the settings that differ between old and cfg and
// that only a restart applies: each top-level section, or for a section
// that is a mapping, each of its keys ("server.listen") but liveKeys.
func restartNeeded(old, cfg *config.Config) []string {
	var out []string
	a, b := reflect.ValueOf(*old), reflect.ValueOf(*cfg)
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" || liveSections[key] {
			continue
		}
		va, vb := a.Field(i), b.Field(i)
		if reflect.DeepEqual(va.Interface(), vb.Interface()) {
			continue
		}
		if f.Type.Kind() != reflect.Struct {
			out = append(out, key)
			continue
		}
		for j := range f.Type.NumField() {
			sub, _, _ := strings.Cut(f.Type.Field(j).Tag.Get("yaml"), ",")
			if sub != "" && !liveKeys[key+"."+sub] && !reflect.DeepEqual(va.Field(j).Interface(), vb.Field(j).Interface()) {
				out = append(out, key+"."+sub)
			}
		}
	}
	return out
}

// reloadStatus is the outcome of the last reload, as /readyz reports it.
type reloadStatus struct {
	At       time.Time `json:"at"`
	Result   string    `json:"result"`             // ok or error
	Problems int       `json:"problems,omitempty"` // how many, on error (the log has each)
	Restart  []string  `json:"restart_needed,omitempty"`
}

// RecordReload counts a configuration reload in
// toolgate_config_reloads_total and shows its outcome on /readyz: err nil
// is a reload applied (a, what Apply returned, may be nil), otherwise the
// problems that kept the configuration before it serving (a joined error
// counts each). While the last reload failed, /readyz says degraded. The
// problems themselves are the caller's to log.
func (g *Gateway) RecordReload(a *Applied, err error) {
	st := &reloadStatus{At: time.Now().UTC(), Result: "ok"}
	if a != nil {
		st.Restart = a.Restart
	}
	if err != nil {
		st.Result, st.Problems = "error", 1
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			st.Problems = len(j.Unwrap())
		}
	}
	g.metrics.Reload(st.Result)
	g.lastReload.Store(st)
}
