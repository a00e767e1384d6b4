package gateway

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/configerr"
	"github.com/toolgate/toolgate/gateway/internal/hooks"
	"github.com/toolgate/toolgate/gateway/internal/restsource"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// hooks is the pipeline step of the configured hooks (the engine is
// package gateway/internal/hooks). For the hooks that match the call, in
// the file's order, it runs each before function (deny_args, webhook
// before); the first to answer ends the call there. Then the call runs,
// and each after function (webhook after, redact, truncate) gets the
// result in turn.
// The chain is built again when a reload changes the hooks (apply.go):
// a call keeps the hooks of the chain it started in.
func (g *Gateway) hooks(next Handler) Handler { return hooksWith(g.hookSet, next) }

// servedHooks returns the hooks served now, for a step built per request
// (surfacecall.go): a reload replaces them under useMu.
func (g *Gateway) servedHooks() []*hooks.Hook {
	g.useMu.Lock()
	defer g.useMu.Unlock()
	return g.hookSet
}

// hooksWith is the hooks step of set.
func hooksWith(set []*hooks.Hook, next Handler) Handler {
	if len(set) == 0 {
		return next
	}
	return func(ctx context.Context, c *Call) (*Result, error) {
		matched := hooks.Match(set, c.Tool.Name, c.Principal)
		if len(matched) == 0 {
			return next(ctx, c)
		}
		hc := hookCall(c)
		hctx, span := telemetry.Child(ctx, "hooks before", telemetry.Internal)
		res := matched.Before(hctx, hc)
		span.End()
		c.Args, c.Raw = hc.Args, hc.Raw // a webhook's new arguments
		if res != nil {
			return (*Result)(res), nil
		}
		out, err := next(ctx, c)
		if err != nil || out == nil {
			return out, err
		}
		hctx, span = telemetry.Child(ctx, "hooks after", telemetry.Internal)
		defer span.End()
		// The call as it is now: a middleware may have changed its Args.
		return (*Result)(matched.After(hctx, hookCall(c), (*executors.Result)(out))), nil
	}
}

// hookCall is what the hooks see of c.
func hookCall(c *Call) *hooks.Call {
	return &hooks.Call{Tool: c.Tool, Principal: c.Principal, Thread: c.Thread, ID: c.ID, Args: c.Args, Raw: c.Raw}
}

// buildHooks builds the configured hooks into g.hookSet.
func (g *Gateway) buildHooks(cfg *config.Config) error {
	set, err := g.newHooks(cfg)
	g.hookSet = set
	return err
}

// newHooks builds the hooks of cfg. Every problem is reported at once,
// each at its place in the file (see [configerr.Place]): globs
// (registry.Filter), regular expressions and JSON pointers by package
// hooks, and the webhook URL by the REST executor, which sends the
// requests.
func (g *Gateway) newHooks(cfg *config.Config) ([]*hooks.Hook, error) {
	var set []*hooks.Hook
	var errs []error
	secrets := restsource.Secrets(cfg.Secrets())
	env := &hooks.Env{
		Logger:      g.logger,
		Webhooks:    g.rest,
		CheckArgs:   checkArgs,
		ErrorResult: func(err error) *executors.Result { return (*executors.Result)(errorResult(err)) },
	}
	for i, hc := range cfg.Hooks {
		h, err := hooks.New(i, hc, secrets, env)
		if err != nil {
			errs = append(errs, configerr.Place(cfg, fmt.Sprintf("hooks[%d]", i), err)...)
			continue
		}
		set = append(set, h)
	}
	if len(errs) > 0 {
		return nil, joinProblems(errs...)
	}
	return set, nil
}

// setHooks serves set from the next call on, building the chain again
// (its steps decide at build time what is configured).
func (g *Gateway) setHooks(set []*hooks.Hook) {
	g.useMu.Lock()
	defer g.useMu.Unlock()
	g.hookSet = set
	g.chain.Store(new(g.buildChain(g.use)))
}
