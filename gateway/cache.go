package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/resultcache"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// CacheMetaKey is the _meta key of a result served from a result cache
// (docs/cache.md); its value is "hit".
const CacheMetaKey = "toolgate/cache"

// The result caches (docs/cache.md): a source (a REST tool, an OpenAPI
// source, an upstream) with a cache section has one, bounded by its
// max_bytes, which its read-only tools' successful results are kept in
// for its ttl. A reload that changes the source replaces its cache, and
// a tool removed or replaced (an upstream listing it again) loses its
// entries.

// resultCaches holds the result cache of each source that has one, by
// registry source ("rest:weather", "openapi:petstore", "upstream:fs").
type resultCaches struct {
	// now tells the time of the caches made from then on; nil means
	// time.Now. Tests set it before any source is added.
	now func() time.Time
	m   sync.Map // string → *sourceCache
}

// sourceCache is one source's cache.
type sourceCache struct {
	public bool // shared across principals
	c      *resultcache.Cache[*executors.Result]
}

// set gives source a new, empty cache as k configures it, or none when k
// is nil; the entries of the cache before it are dropped.
func (rc *resultCaches) set(source string, k *config.Cache) {
	if k == nil {
		rc.m.Delete(source)
		return
	}
	rc.m.Store(source, &sourceCache{public: k.Public, c: resultcache.New[*executors.Result](resultcache.Options{
		TTL: k.TTL.D(), MaxBytes: k.MaxBytes, Now: rc.now,
	})})
}

// setUpstream gives the upstream u's tools the cache u configures. An
// upstream whose tools are thread-scoped (isolation: thread) gets none:
// a result belongs to its thread's server.
func (rc *resultCaches) setUpstream(u config.Upstream) {
	k := u.Cache
	if u.Isolation == "thread" {
		k = nil
	}
	rc.set("upstream:"+u.Name, k)
}

// of returns the cache of t's calls, or nil when t is not cached: its
// source has no cache, or t is not both read-only and idempotent (a REST
// tool's GET or HEAD, an upstream's tool with readOnlyHint true).
// In-process tools are never cached.
func (rc *resultCaches) of(t *registry.Tool) *sourceCache {
	if t.Kind != registry.REST && t.Kind != registry.MCP {
		return nil
	}
	if ro := t.Annotations.ReadOnlyHint; ro == nil || !*ro || !t.Idempotent {
		return nil
	}
	v, ok := rc.m.Load(t.Source)
	if !ok {
		return nil
	}
	return v.(*sourceCache)
}

// forget drops the entries of the tools called names, removed or
// replaced.
func (rc *resultCaches) forget(names []string) {
	rc.m.Range(func(_, v any) bool {
		v.(*sourceCache).c.DropIf(func(key string) bool {
			tool, _, _ := strings.Cut(key, "\x00")
			return slices.Contains(names, tool)
		})
		return true
	})
}

// bytes is what the caches' entries are counted for, together.
func (rc *resultCaches) bytes() float64 {
	var n int64
	rc.m.Range(func(_, v any) bool {
		n += v.(*sourceCache).c.Bytes()
		return true
	})
	return float64(n)
}

// cacheStep answers a call of a cached tool from its source's cache when
// the same call (tool, arguments in canonical JSON, principal unless the
// cache is public) succeeded within the ttl, and otherwise runs it and
// keeps a successful result; concurrent identical calls run once. It
// comes after the hooks' before stage and any middleware (the arguments
// are those the tool would get) and before the slot: a hit takes none.
// The hooks' after stage still runs on a hit. rawArgs says whether the
// arguments reach the tool as the client's raw bytes (no middleware).
func (g *Gateway) cacheStep(rawArgs bool, next Handler) Handler {
	return func(ctx context.Context, c *Call) (*Result, error) {
		sc := g.caches.of(c.Tool)
		if sc == nil {
			return next(ctx, c)
		}
		key, err := cacheKey(c, sc.public, rawArgs)
		if err != nil {
			return next(ctx, c)
		}
		var res *Result
		var callErr error
		v, hit, err := sc.c.Do(ctx, key, func() (*executors.Result, int64, bool) {
			res, callErr = next(ctx, c)
			if callErr != nil || res == nil || res.IsError {
				return nil, 0, false // failures are never kept
			}
			kept := copyResult((*executors.Result)(res))
			b, err := json.Marshal(Result(*kept))
			if err != nil {
				return nil, 0, false
			}
			return kept, int64(len(b)), true
		})
		if err != nil {
			// ctx ended while an identical call ran.
			return errorResult(waitError(ctx, c)), nil
		}
		c.cache = "miss"
		if hit {
			c.cache = "hit"
			res, callErr = hitResult(v), nil
		}
		g.metrics.CacheRequest(c.Tool, hit)
		return res, callErr
	}
}

// cacheKey is the key of c's result: its tool, then (hashed) its
// principal unless the cache is public, and its arguments in canonical
// JSON (as sent, when the tool gets them as sent).
func cacheKey(c *Call, public, rawArgs bool) (string, error) {
	raw := c.Raw
	if !rawArgs {
		raw = nil
	}
	args, err := canonjson.ArgsSum(raw, c.Args)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if !public {
		h.Write([]byte(c.Principal))
	}
	h.Write([]byte{0})
	h.Write(args[:])
	return c.Tool.Name + "\x00" + string(h.Sum(nil)), nil
}

// copyResult copies what a step after the cache could change in place:
// the content parts and _meta. Structured content and an upstream's raw
// result are edited into new values (gateway/internal/resultedit).
func copyResult(r *executors.Result) *executors.Result {
	out := *r
	out.Content = slices.Clone(r.Content)
	out.Meta = maps.Clone(r.Meta)
	return &out
}

// hitResult is the result of a hit: a copy of the kept one, marked as
// from the cache, without the attempts of the call that made it.
func hitResult(kept *executors.Result) *Result {
	out := copyResult(kept)
	if out.Meta == nil {
		out.Meta = map[string]any{}
	}
	delete(out.Meta, executors.AttemptsMetaKey)
	out.Meta[CacheMetaKey] = "hit"
	return (*Result)(out)
}

// waitError is why a call that waited for an identical one ended first.
func waitError(ctx context.Context, c *Call) error {
	if cause, ok := errors.AsType[*retry.Error](context.Cause(ctx)); ok {
		return cause // toolgate shutting down
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return retry.Errorf(retry.Timeout, "the deadline passed while the call to %q waited for an identical call to finish", c.Tool.Name)
	}
	return retry.Errorf(retry.Cancelled, "the call to %q was cancelled while it waited for an identical call to finish", c.Tool.Name)
}

// initCaches gives the sources of cfg the caches they configure, and
// exports the bytes the caches hold.
func (g *Gateway) initCaches(cfg *config.Config) {
	for _, t := range cfg.Rest {
		g.caches.set("rest:"+t.Name, t.Cache)
	}
	for _, o := range cfg.OpenAPI {
		g.caches.set("openapi:"+o.Name, o.Cache)
	}
	for _, u := range cfg.Upstreams {
		g.caches.setUpstream(u)
	}
	g.metrics.Registry().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_cache_bytes",
		Help: "Bytes the result caches' entries are counted for, over every source with a cache (expired entries not yet dropped included).",
	}, g.caches.bytes))
}
