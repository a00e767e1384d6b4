// Package ratelimit counts a principal's calls across every replica of a
// cluster (auth.rate_scope: cluster, issue 26) without a Redis round trip
// on most calls.
//
// The count is GCRA (the generic cell rate algorithm: one timestamp per
// principal, the theoretical arrival time) in one Lua script, timed by
// Redis's own clock, so the replicas' clocks do not matter. A replica
// does not ask for one call at a time: it leases several tokens at once
// and spends them locally, and when Redis says none is left it refuses
// locally until Redis said one would be. A lease is a tenth of a
// second's worth of the rate, at least 1 and at most this replica's
// share of the burst (burst/N): a busy principal costs each replica
// about ten round trips a second however many calls it makes, a refused
// call costs none, and the tokens replicas hold unspent (at most N
// leases) stay within the burst. At low rates (under 10/s) a lease is
// one token: each call that passes is a round trip, a handful a second.
// A lease not spent within a second is dropped, never given back: the
// count errs toward refusing.
//
// When Redis fails, each replica counts the principal on its own at
// rate/N (N: the replicas its Options say), so the cluster stays near
// the rate; the store logs the outage once and counts each failure; once
// Redis answers again the count is global again.
//
// It imports no toolgate package.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Tuning of leases; see the package doc.
const (
	leaseWindow = 100 * time.Millisecond
	leaseTTL    = time.Second
)

// keyPrefix begins each principal's key.
const keyPrefix = "toolgate:rate:"

// gcra leases up to ARGV[3] tokens of the bucket at KEYS[1], whose
// emission interval is ARGV[1] µs (1/rate) and whose burst is ARGV[2]:
// it returns {granted, 0}, or {0, µs until one token would be there}.
// The key holds the theoretical arrival time (µs, Redis's clock) and
// expires when the bucket is full again.
var gcra = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local room = math.floor((now + burst * interval - tat) / interval)
if room < 1 then
  return {0, tat + interval - burst * interval - now}
end
local n = math.min(want, room)
tat = tat + n * interval
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
return {n, 0}
`)

// Redis is where the count lives: *store.Store is one.
type Redis interface {
	// Up reports whether Redis answers.
	Up() bool
	// Do runs op against Redis, noting a failure.
	Do(ctx context.Context, op func(ctx context.Context, c redis.Scripter) error) error
}

// Local is a bucket counted on this replica alone: the fallback while
// Redis is down.
type Local interface {
	// Take takes one call: 0 when it may run, else how long until one
	// could (nothing is taken then).
	Take() time.Duration
}

// Options configure [New]. A nil *Options is accepted.
type Options struct {
	// Replicas is how many replicas share each rate (N): the live
	// members, else the configured peers. nil: 1.
	Replicas func() int
	// Local builds the fallback bucket of perSecond and burst. Required.
	Local func(perSecond float64, burst int) Local
	// Now is the clock of leases and refusals. nil: time.Now.
	Now func() time.Time
}

// Limits are the cluster-wide rate limits of one replica. Close it when
// the replica stops.
type Limits struct {
	r      Redis
	o      Options
	root   context.Context // the Redis operations' parent; ends at Close
	cancel context.CancelFunc
}

// New returns the limits counted in r.
func New(r Redis, o *Options) *Limits {
	l := &Limits{r: r}
	if o != nil {
		l.o = *o
	}
	if l.o.Replicas == nil {
		l.o.Replicas = func() int { return 1 }
	}
	if l.o.Now == nil {
		l.o.Now = time.Now
	}
	l.root, l.cancel = context.WithCancel(context.Background())
	return l
}

// Close ends the limits' Redis operations; a Take after Close counts
// locally.
func (l *Limits) Close() { l.cancel() }

// replicas is N, at least 1.
func (l *Limits) replicas() int { return max(1, l.o.Replicas()) }

// Bucket returns principal's bucket of perSecond calls a second with
// burst, counted across the cluster. Each replica must give a principal
// the same rate and burst.
func (l *Limits) Bucket(principal string, perSecond float64, burst int) *Bucket {
	return &Bucket{l: l, key: keyPrefix + principal, perSecond: perSecond, burst: max(burst, 1),
		interval: max(int64(math.Round(1e6/perSecond)), 1)}
}

// Bucket is one principal's rate across the cluster. Its methods are
// safe for concurrent use.
type Bucket struct {
	l         *Limits
	key       string
	perSecond float64
	burst     int
	interval  int64 // µs between tokens

	// mu guards the fields below; it is never held across a Redis call.
	mu           sync.Mutex
	tokens       int           // leased and unspent
	leaseEnd     time.Time     // tokens are dropped then
	refusedUntil time.Time     // Redis said no token before then
	fetching     chan struct{} // closed when the lease being asked for comes back; nil when none is
	local        Local         // the outage's own bucket, at rate/N; nil while Redis is up
	used         time.Time     // the last Take
}

// Take takes one call: 0 when it may run, else how long until one could
// (nothing is taken then). It asks Redis only when its lease is spent
// and Redis has not said to wait; calls that arrive while it asks wait
// for that answer.
func (b *Bucket) Take() time.Duration {
	for {
		now := b.l.o.Now()
		b.mu.Lock()
		b.used = now
		if !b.l.r.Up() {
			wait := b.fallback()
			b.mu.Unlock()
			return wait
		}
		b.local = nil // the next outage starts a bucket of its own, at its N
		switch {
		case b.tokens > 0 && now.Before(b.leaseEnd):
			b.tokens--
			b.mu.Unlock()
			return 0
		case now.Before(b.refusedUntil):
			b.mu.Unlock()
			return b.refusedUntil.Sub(now)
		case b.fetching != nil:
			ch := b.fetching
			b.mu.Unlock()
			<-ch
			continue
		}
		ch := make(chan struct{})
		b.fetching = ch
		want := b.leaseSize()
		b.mu.Unlock()
		got, wait, err := b.lease(want)
		b.mu.Lock()
		b.fetching = nil
		close(ch)
		wait = b.leased(now, got, wait, err)
		b.mu.Unlock()
		return wait
	}
}

// leased takes one of the got tokens Redis leased at now, or notes its
// wait, or, when Redis failed (the store says so now) or the limits are
// closed, takes from the local bucket. b.mu is held.
func (b *Bucket) leased(now time.Time, got int, wait time.Duration, err error) time.Duration {
	switch {
	case err != nil:
		return b.fallback()
	case got == 0:
		b.refusedUntil = now.Add(wait)
		return max(wait, time.Nanosecond)
	}
	b.tokens, b.leaseEnd = got-1, now.Add(leaseTTL)
	return 0
}

// leaseSize is how many tokens to ask for: a lease window's worth of the
// rate, at least 1, at most this replica's share of the burst.
func (b *Bucket) leaseSize() int {
	n := int(math.Ceil(b.perSecond * leaseWindow.Seconds()))
	return max(1, min(n, b.burst/b.l.replicas()))
}

// lease asks Redis for up to want tokens: how many it got, or how long
// until one is there.
func (b *Bucket) lease(want int) (got int, wait time.Duration, err error) {
	err = b.l.r.Do(b.l.root, func(ctx context.Context, c redis.Scripter) error {
		res, err := gcra.Run(ctx, c, []string{b.key}, b.interval, b.burst, want).Int64Slice()
		if err != nil {
			return err
		}
		got, wait = int(res[0]), time.Duration(res[1])*time.Microsecond
		return nil
	})
	return got, wait, err
}

// fallback takes from the local bucket at rate/N, made at the outage's
// first call. b.mu is held.
func (b *Bucket) fallback() time.Duration {
	if b.local == nil {
		n := b.l.replicas()
		b.tokens = 0 // a lease from before the outage is not spent after it
		b.local = b.l.o.Local(b.perSecond/float64(n), max(1, b.burst/n))
	}
	return b.local.Take()
}

// Idle reports whether the principal has not called for as long as the
// bucket takes to refill: its bucket may be dropped and made anew.
func (b *Bucket) Idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	refill := time.Duration(float64(b.burst) / b.perSecond * float64(time.Second))
	return b.fetching == nil && b.l.o.Now().Sub(b.used) >= refill
}
