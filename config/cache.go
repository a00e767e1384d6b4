package config

import (
	"strconv"
	"time"
)

// Limits and defaults of a cache section.
const (
	// defaultCacheBytes is a cache's max_bytes when the file leaves it
	// out: 16 MiB.
	defaultCacheBytes = 16 << 20
	minCacheBytes     = 1 << 10
	maxCacheBytes     = 1 << 30
	maxCacheTTL       = 24 * time.Hour
)

// Cache keeps the results of a source's read-only tools for a while, so
// that the same call (same tool, same arguments in canonical JSON, same
// principal) within TTL is answered without calling the backend. Only
// tools that are read-only and idempotent are cached: a REST tool's GET or
// HEAD, an OpenAPI source's GET and HEAD operations, an upstream's tools
// whose readOnlyHint is true. Failures are never cached. See
// docs/cache.md.
type Cache struct {
	// TTL is how long a result is served from the cache after the call
	// that made it. Required: positive, at most 24h.
	TTL Duration `yaml:"ttl"`
	// MaxBytes bounds the memory the source's cached results take; past
	// it the least recently used are dropped. From 1024 to 1073741824.
	// Default 16777216 (16 MiB); [Parse] fills it in.
	MaxBytes int64 `yaml:"max_bytes"`
	// Public shares cached results across principals: the tools answer
	// everyone alike. Default false: each principal has its own entries.
	Public bool `yaml:"public"`
}

// completeCache fills in the max_bytes of the cache at path when the
// file left it out. c may be nil.
func completeCache(c *Cache, path string, present func(string) bool) {
	if c != nil && !present(path+".max_bytes") {
		c.MaxBytes = defaultCacheBytes
	}
}

// cache checks the cache section at path.
func (c *checker) cache(path string, k *Cache) {
	if k.TTL <= 0 || k.TTL.D() > maxCacheTTL {
		c.fail(path+".ttl", k.TTL.String(), "is required: a positive duration up to 24h, like 30s, for how long a result is served from the cache")
	}
	if k.MaxBytes < minCacheBytes || k.MaxBytes > maxCacheBytes {
		c.fail(path+".max_bytes", strconv.FormatInt(k.MaxBytes, 10), "must be between %d and %d (1 GiB), like 16777216 (16 MiB); leave it out for 16 MiB", minCacheBytes, maxCacheBytes)
	}
}

// restCache checks the cache of the rest tool t at path: only a
// read-only, idempotent tool may have one.
func (c *checker) restCache(path string, t RESTTool) {
	if t.Cache == nil {
		return
	}
	c.cache(path+".cache", t.Cache)
	switch {
	case t.Method != "GET" && t.Method != "HEAD":
		c.fail(path+".cache", "", "tool %q is a %s, which may change something: only GET and HEAD tools are read-only and may be cached; remove cache", t.Name, t.Method)
	case t.Idempotent != nil && !*t.Idempotent:
		c.fail(path+".cache", "", "tool %q is marked idempotent: false, so a repeated call has an effect of its own and is never answered from a cache; remove cache or idempotent: false", t.Name)
	}
}

// upstreamCache checks the cache of the upstream u at path: its tools
// must be able to be read-only and shared between threads.
func (c *checker) upstreamCache(path string, u Upstream) {
	if u.Cache == nil {
		return
	}
	c.cache(path+".cache", u.Cache)
	switch {
	case u.Isolation == "thread":
		c.fail(path+".cache", "", "upstream %q runs one server per thread (isolation: thread): its tools are thread-scoped and never cached; remove cache or use isolation: shared", u.Name)
	case u.Idempotent != nil && !*u.Idempotent:
		c.fail(path+".cache", "", "upstream %q is marked idempotent: false, so none of its tools is cached; remove cache or idempotent: false", u.Name)
	}
}
