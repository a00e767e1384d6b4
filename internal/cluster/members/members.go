// Package members is which replicas of a cluster are live, kept in the
// cluster's Redis (issue 26): forwarding and the rendezvous hashing of
// named threads ask it, and a rate limit counted locally divides by it.
//
// Each replica keeps a key of its own (toolgate:member:<id> → its peer
// address) with a TTL, and its ID in one sorted set
// (toolgate:members) scored by when that TTL ends, both refreshed every
// third of the TTL by one Lua script, timed by Redis's clock, which
// also drops the expired IDs and reads the live set. A replica that
// stops refreshing is dropped from Redis within the TTL, and from every
// replica's view at its next refresh (so within 4/3 of the TTL); one
// that closes removes itself at once. While Redis is down, the last set
// read stands; before one was read, the configured replicas do.
//
// It imports no toolgate package.
package members

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTTL is how long a replica stays live after its last refresh.
const DefaultTTL = 3 * time.Second

// The keys: the sorted set of IDs, and each replica's own key.
const (
	setKey    = "toolgate:members"
	keyPrefix = "toolgate:member:"
)

// beat refreshes replica ARGV[1] (address ARGV[2], TTL ARGV[3] ms) and
// returns the live IDs.
var beat = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`)

// leave removes replica ARGV[1].
var leave = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('DEL', KEYS[2])
`)

// Redis is where the membership lives: *store.Store is one.
type Redis interface {
	// Up reports whether Redis answers.
	Up() bool
	// Do runs op against Redis, noting a failure.
	Do(ctx context.Context, op func(ctx context.Context, c redis.Scripter) error) error
}

// Options configure [New].
type Options struct {
	// ID is this replica's. Required.
	ID string
	// Addr is its peer address (host:port), stored under its key.
	Addr string
	// TTL is how long it stays live after a refresh; it refreshes every
	// third of it. Default [DefaultTTL].
	TTL time.Duration
	// Configured are the IDs taken to be live until Redis is read: the
	// configured peers. This replica is always among the members.
	Configured []string
}

// Members is this replica's view of the live replicas. Its methods are
// safe for concurrent use; Close removes the replica.
type Members struct {
	r    Redis
	o    Options
	key  string
	live atomic.Pointer[[]string] // sorted, this replica included; never changed once stored
	// stop ends the refresh loop; nil until Start, which Close must not
	// run alongside.
	stop   context.CancelFunc
	wg     sync.WaitGroup // the refresh loop
	joined atomic.Bool    // a refresh wrote this replica's key
}

// New returns the membership of replica o.ID, not yet started.
func New(r Redis, o Options) *Members {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	m := &Members{r: r, o: o, key: keyPrefix + o.ID}
	m.set(o.Configured)
	return m
}

// Start refreshes the membership once, then every third of the TTL
// until Close.
func (m *Members) Start(ctx context.Context) {
	m.Refresh(ctx)
	loop, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = stop
	m.wg.Go(func() {
		t := time.NewTicker(m.o.TTL / 3)
		defer t.Stop()
		for {
			select {
			case <-loop.Done():
				return
			case <-t.C:
				m.Refresh(loop)
			}
		}
	})
}

// Refresh refreshes this replica's key and reads the live set, unless
// Redis is down (its probe looks for it; the last set read stands).
func (m *Members) Refresh(ctx context.Context) {
	if !m.r.Up() {
		return
	}
	_ = m.r.Do(ctx, func(ctx context.Context, c redis.Scripter) error {
		m.joined.Store(true) // the key may be written even if the answer is lost
		ids, err := beat.Run(ctx, c, []string{setKey, m.key}, m.o.ID, m.o.Addr, m.o.TTL.Milliseconds()).StringSlice()
		if err == nil {
			m.set(ids)
		}
		return err // counted by the store
	})
}

// set stores ids, with this replica, as the live set.
func (m *Members) set(ids []string) {
	live := slices.Clone(ids)
	if !slices.Contains(live, m.o.ID) {
		live = append(live, m.o.ID)
	}
	slices.Sort(live)
	live = slices.Compact(live)
	m.live.Store(&live)
}

// Members returns the IDs of the live replicas, sorted, this one
// included. The slice is shared: do not modify it.
func (m *Members) Members() []string { return *m.live.Load() }

// Close stops refreshing and, when this replica refreshed its key,
// removes it from Redis, so the others drop it at their next refresh
// rather than after the TTL. (A process that never refreshed, like a
// command run beside a replica with its configuration, must not remove
// that replica.)
func (m *Members) Close(ctx context.Context) {
	if m.stop != nil {
		m.stop()
		m.wg.Wait()
	}
	if !m.joined.Load() || !m.r.Up() {
		return
	}
	_ = m.r.Do(ctx, func(ctx context.Context, c redis.Scripter) error {
		return leave.Run(ctx, c, []string{setKey, m.key}, m.o.ID).Err()
	})
}
