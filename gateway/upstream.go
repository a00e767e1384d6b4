package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/mcpup"
	"github.com/toolgate/toolgate/gateway/internal/configerr"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/schemas"
)

// buildUpstreams builds (without starting) the upstream MCP servers of cfg.
// Every problem with their settings is reported at once, each as
// file:line:col: path: message.
func (g *Gateway) buildUpstreams(cfg *config.Config) error {
	ups, err := g.newUpstreams(cfg)
	if err != nil {
		return err
	}
	for _, u := range ups {
		g.ups.put(u)
	}
	g.metrics.Registry().MustRegister(&needsAuthCollector{g: g})
	return nil
}

// newUpstreams builds (without starting or recording) a manager for each
// upstream of cfg, or reports every problem with their settings at once.
func (g *Gateway) newUpstreams(cfg *config.Config) ([]*liveUpstream, error) {
	secrets := cfg.Secrets()
	var errs []error
	store, err := g.tokenStore(cfg)
	if err != nil {
		return nil, err
	}
	built := make([]mcpup.Upstream, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		up := upstreamOf(u, append(oauthSecrets(u), secrets...))
		if oc, err := OAuthConfig(cfg, i, store, g.browser); err != nil {
			errs = append(errs, err)
		} else {
			up.OAuth = oc
		}
		if err := up.Validate(); err != nil {
			errs = append(errs, configerr.Place(cfg, fmt.Sprintf("upstreams[%d]", i), err)...)
		}
		built[i] = up
	}
	errs = append(errs, upstreamNameErrors(cfg)...)
	if len(errs) > 0 {
		return nil, joinProblems(errs...)
	}
	ups := make([]*liveUpstream, 0, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		m, err := g.newUpstream(u, built[i], cfg.Defaults.MaxParallel)
		if err != nil {
			return nil, err
		}
		ups = append(ups, &liveUpstream{cfg: u, m: m})
	}
	return ups, nil
}

// upstreamOf is the mcpup form of the configured upstream u, but for its
// OAuth client (newUpstreams adds it).
func upstreamOf(u config.Upstream, secrets []string) mcpup.Upstream {
	return mcpup.Upstream{
		Name:            u.Name,
		Prefix:          u.Prefix,
		Transport:       u.Transport,
		Command:         u.Command,
		Args:            u.Args,
		Env:             u.Env,
		Cwd:             u.Cwd,
		InheritEnv:      u.InheritEnv,
		URL:             u.URL,
		Headers:         u.Headers,
		Isolation:       u.Isolation,
		Include:         u.Include,
		Exclude:         u.Exclude,
		Timeout:         u.Timeout.D(),
		StartupTimeout:  u.StartupTimeout.D(),
		MaxMessageBytes: u.MaxMessageBytes,
		Idempotent:      u.Idempotent,
		Secrets:         secrets,
	}
}

// newUpstream builds the manager of one upstream, u (up in mcpup's form),
// whose tools reach the registry as it lists them, with maxParallel
// (defaults.max_parallel as it is when the upstream starts) calls at once.
func (g *Gateway) newUpstream(u config.Upstream, up mcpup.Upstream, maxParallel int) (*mcpup.Manager, error) {
	thread := u.Isolation == mcpup.IsolationThread // its tools take thread handles
	return mcpup.New([]mcpup.Upstream{up}, &mcpup.Options{
		Logger: g.logger,
		Pool:   g.pool,
		OnTools: func(upstream string, tools []executors.Bound) error {
			if thread {
				return g.addThreadUpstreamTools(upstream, g.servableTools(upstream, tools))
			}
			return g.addUpstreamTools(upstream, g.servableTools(upstream, tools))
		},
		OnState:   g.upstreamState,
		OnRestart: g.metrics.UpstreamRestart,
		OnCatalog: g.upstreamCatalog,
		OnNotify:  g.upstreamNotify,
		OnRelist:  g.metrics.UpstreamRelist,
		// As many calls to one upstream may run at once as to all.
		MaxParallel: maxParallel,
	})
}

// tokenStore opens the token store when an upstream of cfg has oauth
// (nil otherwise).
func (g *Gateway) tokenStore(cfg *config.Config) (*oauthclient.Store, error) {
	for _, u := range cfg.Upstreams {
		if u.OAuth == nil {
			continue
		}
		store, err := OpenTokenStore(cfg)
		if err != nil {
			return nil, fmt.Errorf("upstream %s has oauth, whose tokens are stored encrypted: %w", u.Name, err)
		}
		return store, nil
	}
	return nil, nil
}

// servableTools returns the tools of upstream that the registry can take,
// dropping, each with a warning naming it, a tool whose input or output
// schema does not compile and one whose name another source already has
// (an upstream with prefix "", or two upstreams listing the same name
// under their prefixes): the registry would refuse the whole listing for
// one of them.
func (g *Gateway) servableTools(upstream string, tools []executors.Bound) []executors.Bound {
	source := "upstream:" + upstream
	out := tools[:0:0]
	for _, b := range tools {
		t := &b.Tool
		if _, err := schemas.Compile(t.InputSchema); err != nil {
			g.logger.Warn("dropping an upstream tool whose input schema does not compile", "upstream", upstream, "tool", t.Name, "error", err)
			continue
		}
		if t.OutputSchema != nil {
			if _, err := schemas.Compile(t.OutputSchema); err != nil {
				g.logger.Warn("dropping an upstream tool whose output schema does not compile", "upstream", upstream, "tool", t.Name, "error", err)
				continue
			}
		}
		if c := g.catalogs[source]; c != nil && c.IsMeta(t.Name) {
			g.logger.Warn("dropping an upstream tool named as one of its catalog's meta-tools (catalog: search); exclude it or give the upstream a prefix", "upstream", upstream, "tool", t.Name)
			continue
		}
		if old, ok := g.reg.Get(t.Name); ok && old.Source != source {
			g.logger.Warn("dropping an upstream tool whose name another source has; give the upstream a prefix", "upstream", upstream, "tool", t.Name, "held_by", old.Source)
			continue
		}
		out = append(out, b)
	}
	return out
}

// upstreamNameErrors checks that the upstreams' names are unique and
// clear of the openapi sources' and the rest tools' names: an upstream's
// tools are named <name>__<tool>. Each name's own form is checked by
// mcpup.
func upstreamNameErrors(cfg *config.Config) []error {
	var errs []error
	fail := func(path, got, format string, args ...any) {
		errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: got, Msg: fmt.Sprintf(format, args...)}))
	}
	sources := map[string]int{}
	for i, o := range cfg.OpenAPI {
		if _, dup := sources[o.Name]; !dup && registry.ValidatePrefix(o.Name) == nil {
			sources[o.Name] = i
		}
	}
	ups := map[string]int{}
	for i, u := range cfg.Upstreams {
		path := fmt.Sprintf("upstreams[%d].name", i)
		if registry.ValidatePrefix(u.Name) != nil {
			continue // mcpup reports it
		}
		if j, dup := ups[u.Name]; dup {
			fail(path, u.Name, "duplicate upstream name, already used by upstreams[%d]; rename one", j)
			continue
		}
		ups[u.Name] = i
		if u.Prefix != nil {
			continue // prefixErrors checks it
		}
		if j, clash := sources[u.Name]; clash {
			fail(path, u.Name, "clashes with openapi[%d] of the same name (both prefix tool names with %s); rename one", j, registry.Prefixed(configerr.Shown(cfg, u.Name, "<this name>"), ""))
			continue
		}
		for j, t := range cfg.Rest {
			if registry.UnderPrefix(t.Name, u.Name) {
				fail(path, u.Name, "clashes with rest[%d] (%s), as this upstream's tools are named %s<tool>; rename the upstream or the tool", j, configerr.Shown(cfg, registry.QuoteValue(t.Name), "its name"), registry.Prefixed(configerr.Shown(cfg, u.Name, "<this name>"), ""))
				break
			}
		}
	}
	return append(errs, prefixErrors(cfg)...)
}

// prefixErrors checks the upstreams that set prefix: a non-empty prefix
// may be no other upstream's or openapi source's, and no rest tool's name
// may start with it. An empty one is checked as tools are listed: the
// registry refuses a name another source holds.
func prefixErrors(cfg *config.Config) []error {
	var errs []error
	taken := map[string]string{} // effective prefix → who has it
	for i, o := range cfg.OpenAPI {
		taken[o.Name+registry.Separator] = fmt.Sprintf("openapi[%d]", i)
	}
	for i, u := range cfg.Upstreams {
		if u.Prefix == nil {
			taken[u.Name+registry.Separator] = fmt.Sprintf("upstreams[%d]", i)
		}
	}
	for i, u := range cfg.Upstreams {
		if u.Prefix == nil || *u.Prefix == "" {
			continue
		}
		p := *u.Prefix
		path := fmt.Sprintf("upstreams[%d].prefix", i)
		shown := configerr.Shown(cfg, registry.QuoteValue(p), "this prefix")
		if other, clash := taken[p]; clash {
			errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: p, Msg: fmt.Sprintf("%s is also the prefix of %s's tools; give one of them another prefix", shown, other)}))
			continue
		}
		taken[p] = fmt.Sprintf("upstreams[%d]", i)
		for j, t := range cfg.Rest {
			if strings.HasPrefix(t.Name, p) {
				errs = append(errs, cfg.Locate(config.Problem{Path: path, Got: p, Msg: fmt.Sprintf("clashes with rest[%d] (%s), whose name starts with %s; change the prefix or rename the tool", j, configerr.Shown(cfg, registry.QuoteValue(t.Name), "its name"), shown)}))
				break
			}
		}
	}
	return errs
}

// StartUpstreams starts connecting to the configured upstream MCP servers
// in the background; their tools reach the registry (and connected
// clients, through notifications/tools/list_changed) as each one comes up.
// An upstream that fails is logged, reported by /readyz and metrics, and
// retried. Calling it again does nothing. `toolgate validate` does not call
// it, so validating a configuration starts no process.
func (g *Gateway) StartUpstreams() { g.ups.start() }

// WaitUpstreams waits until every upstream MCP server is connected and has
// listed its tools (or waits for a person to authorize it), or ctx is done; it returns ctx's error then. Without
// upstreams it returns at once.
func (g *Gateway) WaitUpstreams(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		up := true
		waiting := g.ups.needsAuth() // settled: nothing changes without a person
		for name, ok := range g.ups.status() {
			_, w := waiting[name]
			up = up && (ok || w)
		}
		if up {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// upstreamStatus is the per-upstream state /readyz reports, or nil.
func (g *Gateway) upstreamStatus() map[string]bool { return g.ups.status() }

// upstreamState is told each time an upstream goes up or down. Coming up
// (its supervisor has reconnected it and listed its tools) also closes
// its circuit breaker: the failures that opened it were the outage the
// supervisor has just ended, and calls should not wait out open_for.
func (g *Gateway) upstreamState(upstream string, up bool) {
	g.metrics.UpstreamState(upstream, up)
	if up {
		g.res.Backend("upstream:" + upstream).Breaker().Reset()
	}
}
