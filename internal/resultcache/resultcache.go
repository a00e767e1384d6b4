// Package resultcache is a bounded cache of call results: entries live for
// a fixed time (TTL), the least recently used go first once the entries'
// bytes pass a bound, and concurrent misses of one key run the fill
// function once (single flight), the others waiting for its value. A value
// the fill function says not to keep (a failure) is never stored nor
// handed to the waiters: each of them then fills on its own, one at a
// time. It imports nothing beyond the standard library;
// gateway/internal/callcache keys it by tool, principal and canonical
// arguments.
package resultcache

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// EntryOverhead is the bytes an entry is counted for beyond its key and
// value: the bookkeeping the cache holds for it.
const EntryOverhead = 128

// Options configure a [Cache].
type Options struct {
	// TTL is how long an entry is served after it was stored. Required:
	// positive.
	TTL time.Duration
	// MaxBytes bounds the bytes of the entries held (each counted as its
	// key, the size its fill function gave and [EntryOverhead]); past it
	// the least recently used entries are dropped, and a value larger
	// than the bound is not stored. Required: positive.
	MaxBytes int64
	// Now tells the time; nil means time.Now. Tests give a fake clock.
	Now func() time.Time
}

// Cache maps string keys to values of type V. Its zero value is not
// usable; make one with [New]. Safe for concurrent use.
type Cache[V any] struct {
	ttl time.Duration
	max int64
	now func() time.Time

	mu      sync.Mutex
	items   map[string]*list.Element // of *entry[V]
	lru     *list.List               // most recently used first
	bytes   int64
	flights map[string]*flight[V]
}

type entry[V any] struct {
	key     string
	v       V
	size    int64
	expires time.Time
}

// flight is a fill in progress; done is closed when it ends, and v holds
// its value when kept.
type flight[V any] struct {
	done chan struct{}
	v    V
	kept bool
}

// New returns an empty cache. It panics when o.TTL or o.MaxBytes is not
// positive: the configuration is checked before a cache is made.
func New[V any](o Options) *Cache[V] {
	if o.TTL <= 0 || o.MaxBytes <= 0 {
		panic("resultcache: TTL and MaxBytes must be positive")
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{ttl: o.TTL, max: o.MaxBytes, now: now,
		items: map[string]*list.Element{}, lru: list.New(), flights: map[string]*flight[V]{}}
}

// Get returns the live value of key, if any.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.get(key)
}

// get is Get under c.mu; an expired entry is dropped.
func (c *Cache[V]) get(key string) (V, bool) {
	var zero V
	el, ok := c.items[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*entry[V])
	if !c.now().Before(e.expires) {
		c.remove(el)
		return zero, false
	}
	c.lru.MoveToFront(el)
	return e.v, true
}

// Fill makes the value of a key on a miss: the value, its size in bytes,
// and whether to keep it (false for a failure, which is returned to its
// caller only).
type Fill[V any] func() (v V, size int64, keep bool)

// Do returns the live value of key (hit true), or the value of a fill of
// key already in progress once it ends and was kept (hit true), or else
// runs fill itself (hit false) and stores its value when fill says to
// keep it. The error is ctx's, when it ends while Do waits for another
// caller's fill; fill itself is never interrupted by Do.
func (c *Cache[V]) Do(ctx context.Context, key string, fill Fill[V]) (v V, hit bool, err error) {
	for {
		c.mu.Lock()
		if v, ok := c.get(key); ok {
			c.mu.Unlock()
			return v, true, nil
		}
		f, waiting := c.flights[key]
		if !waiting {
			f = &flight[V]{done: make(chan struct{})}
			c.flights[key] = f
			c.mu.Unlock()
			return c.lead(key, f, fill), false, nil
		}
		c.mu.Unlock()
		select {
		case <-f.done:
			if f.kept {
				return f.v, true, nil
			}
			// Not kept (a failure): fill again, one caller at a time.
		case <-ctx.Done():
			var zero V
			return zero, false, ctx.Err()
		}
	}
}

// lead runs fill for key as the flight f, stores what it keeps and ends
// f, also when fill panics.
func (c *Cache[V]) lead(key string, f *flight[V], fill Fill[V]) V {
	defer func() {
		c.mu.Lock()
		delete(c.flights, key)
		c.mu.Unlock()
		close(f.done)
	}()
	v, size, keep := fill()
	if keep {
		f.v, f.kept = v, true
		c.put(key, v, size)
	}
	return v
}

// put stores v under key, dropping the least recently used entries past
// the bound. A value over the bound on its own is not stored.
func (c *Cache[V]) put(key string, v V, size int64) {
	size += int64(len(key)) + EntryOverhead
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.remove(el)
	}
	c.items[key] = c.lru.PushFront(&entry[V]{key: key, v: v, size: size, expires: c.now().Add(c.ttl)})
	c.bytes += size
	for c.bytes > c.max {
		c.remove(c.lru.Back())
	}
}

// remove drops the entry el under c.mu.
func (c *Cache[V]) remove(el *list.Element) {
	e := c.lru.Remove(el).(*entry[V])
	delete(c.items, e.key)
	c.bytes -= e.size
}

// DropIf drops every entry whose key drop reports true; fills in
// progress still store their values.
func (c *Cache[V]) DropIf(drop func(key string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, el := range c.items {
		if drop(key) {
			c.remove(el)
		}
	}
}

// Bytes returns the bytes the entries are counted for, expired entries
// not yet dropped included.
func (c *Cache[V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Len returns the number of entries held, expired entries not yet dropped
// included.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
