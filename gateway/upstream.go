package gateway

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/mcpup"
	"github.com/toolgate/toolgate/gateway/internal/configerr"
	"github.com/toolgate/toolgate/gateway/internal/gatewaymetrics"
	"github.com/toolgate/toolgate/gateway/internal/upstreamset"
	"github.com/toolgate/toolgate/internal/mcppeer"
	"github.com/toolgate/toolgate/internal/upstreamoauth"
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
		g.ups.Put(u)
	}
	g.metrics.Registry().MustRegister(gatewaymetrics.NeedsAuth{WithOAuth: g.ups.WithOAuth, Waiting: g.ups.NeedsAuth})
	return nil
}

// newUpstreams builds (without starting or recording) a manager for each
// upstream of cfg, or reports every problem with their settings at once.
func (g *Gateway) newUpstreams(cfg *config.Config) ([]*upstreamset.Upstream, error) {
	secrets := cfg.Secrets()
	var errs []error
	store, err := upstreamoauth.StoreFor(cfg)
	if err != nil {
		return nil, err
	}
	built := make([]mcpup.Upstream, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		up := upstreamset.Spec(u, append(upstreamoauth.Secrets(u), secrets...))
		if oc, err := upstreamoauth.Settings(cfg, i, store, g.browser); err != nil {
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
	ups := make([]*upstreamset.Upstream, 0, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		m, err := g.newUpstream(u, built[i], cfg.Defaults.MaxParallel)
		if err != nil {
			return nil, err
		}
		ups = append(ups, &upstreamset.Upstream{Config: u, Manager: m})
	}
	return ups, nil
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

// servableTools returns the tools of upstream that the registry can take
// ([upstreamset.Servable]).
func (g *Gateway) servableTools(upstream string, tools []executors.Bound) []executors.Bound {
	var isMeta func(string) bool
	if c := g.catalogs.Of("upstream:" + upstream); c != nil {
		isMeta = c.IsMeta
	}
	return upstreamset.Servable(upstream, tools, g.reg, isMeta, g.logger)
}

// upstreamNameErrors checks the upstreams' names and prefixes
// ([upstreamset.NameErrors]).
func upstreamNameErrors(cfg *config.Config) []error {
	return upstreamset.NameErrors(cfg)
}

// addUpstreamTools replaces the tools of upstream with tools, as it lists
// them (again), and forgets the executors of tools it no longer lists.
func (g *Gateway) addUpstreamTools(upstream string, tools []executors.Bound) error {
	return g.setSourceTools("upstream:"+upstream, tools)
}

// upstreamNotify passes an upstream's notification on to the clients it
// is for ([upstreamset.Notify]).
func (g *Gateway) upstreamNotify(upstream, method string, params map[string]any, to mcppeer.Peer) {
	upstreamset.Notify(&g.ups, g.fronts(), upstream, method, params, to)
}

// StartUpstreams starts connecting to the configured upstream MCP servers
// in the background; their tools reach the registry (and connected
// clients, through notifications/tools/list_changed) as each one comes up.
// An upstream that fails is logged, reported by /readyz and metrics, and
// retried. Calling it again does nothing. `toolgate validate` does not call
// it, so validating a configuration starts no process.
func (g *Gateway) StartUpstreams() { g.ups.Start() }

// WaitUpstreams waits until every upstream MCP server is connected and has
// listed its tools (or waits for a person to authorize it), or ctx is done; it returns ctx's error then. Without
// upstreams it returns at once.
func (g *Gateway) WaitUpstreams(ctx context.Context) error { return g.ups.Wait(ctx) }

// upstreamStatus is the per-upstream state /readyz reports, or nil.
func (g *Gateway) upstreamStatus() map[string]bool { return g.ups.Status() }

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
