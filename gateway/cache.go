package gateway

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/callcache"
)

// CacheMetaKey is the _meta key of a result served from a result cache
// (docs/cache.md); its value is "hit".
const CacheMetaKey = callcache.MetaKey

// cacheStep answers a call of a cached tool from its source's cache
// (package gateway/internal/callcache) when the same call (tool,
// arguments in canonical JSON, principal unless the cache is public)
// succeeded within the ttl, and otherwise runs it and keeps a successful
// result; concurrent identical calls run once. It comes after the hooks'
// before stage and any middleware (the arguments are those the tool would
// get) and before the slot: a hit takes none. The hooks' after stage
// still runs on a hit. rawArgs says whether the arguments reach the tool
// as the client's raw bytes (no middleware).
func (g *Gateway) cacheStep(rawArgs bool, next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		sc := g.caches.Of(c.Tool)
		if sc == nil {
			return next(ctx, c)
		}
		raw := c.Raw
		if !rawArgs {
			raw = nil
		}
		key, err := sc.Key(c.Tool.Name, c.Principal, raw, c.Args)
		if err != nil {
			return next(ctx, c)
		}
		var res *Result
		var callErr error
		hit, err := sc.Do(ctx, key, func() *executors.Result {
			if res, callErr = next(ctx, c); callErr != nil {
				return nil
			}
			return (*executors.Result)(res)
		})
		if err != nil {
			return errorResult(err), nil // ctx ended while an identical call ran
		}
		c.cache = "miss"
		if hit != nil {
			c.cache = "hit"
			res, callErr = (*Result)(hit), nil
		}
		g.metrics.CacheRequest(c.Tool, hit != nil)
		return res, callErr
	}
}

// initCaches gives the sources of cfg the caches they configure, and
// exports the bytes the caches hold.
func (g *Gateway) initCaches(cfg *config.Config) {
	g.caches.Configure(cfg)
	g.metrics.Registry().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_cache_bytes",
		Help: "Bytes the result caches' entries are counted for, over every source with a cache (expired entries not yet dropped included).",
	}, g.caches.Bytes))
}
