// Package callcache is the gateway's result caches (docs/cache.md): a
// source (a REST tool, an OpenAPI source, an upstream) with a cache
// section has one, bounded by its max_bytes, which its read-only tools'
// successful results are kept in for its ttl. A reload that changes the
// source replaces its cache, and a tool removed or replaced (an upstream
// listing it again) loses its entries.
//
// The package owns the caches by source, which tools are cached, the key
// of a call (tool, principal unless the cache is public, canonical
// arguments), and the copies kept and served. It does not know the
// pipeline: the gateway's cache step asks it for a tool's cache and runs
// the call through [Cache.Do]. The cache itself (TTL, bytes, single
// flight) is internal/resultcache.
package callcache

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

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/mcpwire"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/resultcache"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// MetaKey is the _meta key of a result served from a cache; its value is
// "hit".
const MetaKey = "toolgate/cache"

// Set holds the cache of each source that has one, by registry source
// ("rest:weather", "openapi:petstore", "upstream:fs"). Its zero value has
// no caches; it is safe for concurrent use.
type Set struct {
	// Now tells the time of the caches made from then on; nil means
	// time.Now. Tests set it before any source is added.
	Now func() time.Time
	m   sync.Map // string → *Cache
}

// Cache is one source's cache.
type Cache struct {
	public bool // shared across principals
	c      *resultcache.Cache[*executors.Result]
}

// Set gives source a new, empty cache as k configures it, or none when k
// is nil; the entries of the cache before it are dropped.
func (s *Set) Set(source string, k *config.Cache) {
	if k == nil {
		s.m.Delete(source)
		return
	}
	s.m.Store(source, &Cache{public: k.Public, c: resultcache.New[*executors.Result](resultcache.Options{
		TTL: k.TTL.D(), MaxBytes: k.MaxBytes, Now: s.Now,
	})})
}

// SetUpstream gives the upstream u's tools the cache u configures. An
// upstream whose tools are thread-scoped (isolation: thread) gets none:
// a result belongs to its thread's server.
func (s *Set) SetUpstream(u config.Upstream) {
	k := u.Cache
	if u.Isolation == "thread" {
		k = nil
	}
	s.Set("upstream:"+u.Name, k)
}

// Configure gives the sources of cfg the caches they configure.
func (s *Set) Configure(cfg *config.Config) {
	for _, t := range cfg.Rest {
		s.Set("rest:"+t.Name, t.Cache)
	}
	for _, o := range cfg.OpenAPI {
		s.Set("openapi:"+o.Name, o.Cache)
	}
	for _, u := range cfg.Upstreams {
		s.SetUpstream(u)
	}
}

// Of returns the cache of t's calls, or nil when t is not cached: its
// source has no cache, or t is not both read-only and idempotent (a REST
// tool's GET or HEAD, an upstream's tool with readOnlyHint true).
// In-process tools are never cached.
func (s *Set) Of(t *registry.Tool) *Cache {
	if t.Kind != registry.REST && t.Kind != registry.MCP {
		return nil
	}
	if ro := t.Annotations.ReadOnlyHint; ro == nil || !*ro || !t.Idempotent {
		return nil
	}
	v, ok := s.m.Load(t.Source)
	if !ok {
		return nil
	}
	return v.(*Cache)
}

// Forget drops the entries of the tools called names, removed or
// replaced.
func (s *Set) Forget(names []string) {
	s.m.Range(func(_, v any) bool {
		v.(*Cache).c.DropIf(func(key string) bool {
			tool, _, _ := strings.Cut(key, "\x00")
			return slices.Contains(names, tool)
		})
		return true
	})
}

// Bytes is what the caches' entries are counted for, together.
func (s *Set) Bytes() float64 {
	var n int64
	s.m.Range(func(_, v any) bool {
		n += v.(*Cache).c.Bytes()
		return true
	})
	return float64(n)
}

// Key is the key of a call of the tool called tool as principal: its tool,
// then (hashed) its principal unless the cache is public, and its
// arguments in canonical JSON: raw, the arguments as sent, when the tool
// gets them as sent (nil otherwise), else args.
func (c *Cache) Key(tool, principal string, raw json.RawMessage, args map[string]any) (string, error) {
	sum, err := canonjson.ArgsSum(raw, args)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if !c.public {
		h.Write([]byte(principal))
	}
	h.Write([]byte{0})
	h.Write(sum[:])
	return tool + "\x00" + string(h.Sum(nil)), nil
}

// Do answers the call of key from the cache when the same call succeeded
// within the ttl: it returns a copy of that result, marked as a hit
// ([MetaKey]), without the attempts of the call that made it. Otherwise it
// runs run, which runs the call and returns its result (nil when it
// failed with an error), keeps that result when it is a success, and
// returns nil: the caller has run's outcome. Concurrent identical calls
// run once. When ctx ends while an identical call runs, Do returns why,
// classified.
func (c *Cache) Do(ctx context.Context, key string, run func() *executors.Result) (*executors.Result, error) {
	v, hit, err := c.c.Do(ctx, key, func() (*executors.Result, int64, bool) {
		res := run()
		if res == nil || res.IsError {
			return nil, 0, false // failures are never kept
		}
		kept := copyResult(res)
		b, err := mcpwire.Encode(kept) // counted as the client's JSON
		if err != nil {
			return nil, 0, false
		}
		return kept, int64(len(b)), true
	})
	if err != nil {
		tool, _, _ := strings.Cut(key, "\x00")
		return nil, waitError(ctx, tool)
	}
	if !hit {
		return nil, nil
	}
	return hitResult(v), nil
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
func hitResult(kept *executors.Result) *executors.Result {
	out := copyResult(kept)
	if out.Meta == nil {
		out.Meta = map[string]any{}
	}
	delete(out.Meta, executors.AttemptsMetaKey)
	out.Meta[MetaKey] = "hit"
	return out
}

// waitError is why a call of tool that waited for an identical one ended
// first.
func waitError(ctx context.Context, tool string) error {
	if cause, ok := errors.AsType[*retry.Error](context.Cause(ctx)); ok {
		return cause // toolgate shutting down
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return retry.Errorf(retry.Timeout, "the deadline passed while the call to %q waited for an identical call to finish", tool)
	}
	return retry.Errorf(retry.Cancelled, "the call to %q was cancelled while it waited for an identical call to finish", tool)
}
