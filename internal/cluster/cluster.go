// Package cluster is what a replica keeps in the cluster's Redis
// (cluster.redis, issue 26), put together from the configuration: the
// connection and its outage watch (cluster/store), the live replicas
// (cluster/members), the relay of call events between the replicas
// (cluster/eventrelay), and, with auth.rate_scope: cluster, the
// principals' rates counted across the replicas (cluster/ratelimit). Nothing of it
// is on a call's path but a rate limit's occasional lease. gateway
// builds it and hands its pieces to auth and to forwarding through
// small function values.
//
// It imports config and internal/auth, and its subpackages.
package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/cluster/eventrelay"
	"github.com/toolgate/toolgate/internal/cluster/members"
	"github.com/toolgate/toolgate/internal/cluster/ratelimit"
	"github.com/toolgate/toolgate/internal/cluster/store"
)

// closeTimeout bounds removing this replica from Redis at Close.
const closeTimeout = time.Second

// Options configure [Open]. A nil *Options is accepted.
type Options struct {
	// Logger receives the one warning of each Redis outage. Default:
	// discard.
	Logger *slog.Logger
	// OnRedisError, when set, is told of every failed Redis operation
	// (a metric).
	OnRedisError func()
	// DeliverEvent receives the call events of the other replicas while
	// this one has watchers (eventrelay.Options.Deliver).
	DeliverEvent func(json.RawMessage)
	// OnEventDropped, when set, is told of each call event the relay
	// dropped (a metric).
	OnEventDropped func()
}

// Redis is this replica's part of the cluster's Redis. Close it when the
// replica stops.
type Redis struct {
	store   *store.Store
	members *members.Members
	limits  *ratelimit.Limits // nil unless auth.rate_scope is cluster
	events  *eventrelay.Relay
	join    sync.Once
}

// Open connects to cfg's cluster.redis (it joins the membership at
// [Redis.Join]); it returns nil when cfg has no cluster or no cluster.redis. A Redis that
// does not answer is no error: it is logged once and looked for until it
// answers, and meanwhile the replica counts locally. The error is for a
// URL that is not a usable Redis URL.
func Open(ctx context.Context, cfg *config.Config, o *Options) (*Redis, error) {
	k := cfg.Cluster
	if k == nil || k.Redis == "" {
		return nil, nil
	}
	var opts Options
	if o != nil {
		opts = *o
	}
	s, err := store.Open(ctx, k.Redis, &store.Options{Logger: opts.Logger, OnError: opts.OnRedisError})
	if err != nil {
		return nil, err
	}
	addr := k.Peers[k.ReplicaID]
	if addr == "" {
		addr = cfg.Server.Listen
	}
	deliver := opts.DeliverEvent
	if deliver == nil {
		deliver = func(json.RawMessage) {}
	}
	r := &Redis{store: s, members: members.New(s, members.Options{
		ID: k.ReplicaID, Addr: addr, Configured: slices.Sorted(maps.Keys(k.Peers)),
	}), events: eventrelay.New(s, eventrelay.Options{Self: k.ReplicaID, Deliver: deliver, Dropped: opts.OnEventDropped})}
	if cfg.Auth.RateScope == config.RateScopeCluster {
		r.limits = ratelimit.New(s, &ratelimit.Options{
			Replicas: func() int { return len(r.members.Members()) },
			Local:    func(perSecond float64, burst int) ratelimit.Local { return auth.NewLocal(perSecond, burst) },
		})
	}
	return r, nil
}

// Join makes this replica a member of the cluster until Close: it reads
// the live set and refreshes its own key from now on, and relays call
// events with the other members. Only a replica
// that serves HTTP joins, since its peers reach it there; a command run
// beside it with the same configuration (toolgate tools, call) does not,
// and so does not take its place. A nil *Redis joins nothing.
func (r *Redis) Join(ctx context.Context) {
	if r == nil {
		return
	}
	r.join.Do(func() {
		r.members.Start(ctx)
		r.events.Start()
	})
}

// Events is the relay of call events between the replicas, or nil for a
// nil *Redis.
func (r *Redis) Events() *eventrelay.Relay {
	if r == nil {
		return nil
	}
	return r.events
}

// Members returns the IDs of the live replicas, sorted, this one
// included: as last read from Redis, or the configured peers before
// Redis was read. The slice is shared: do not modify it.
func (r *Redis) Members() []string { return r.members.Members() }

// Buckets is the principals' rate limits counted across the replicas
// (auth.Options.Bucket), or nil unless auth.rate_scope is cluster.
func (r *Redis) Buckets() auth.BucketFunc {
	if r == nil || r.limits == nil {
		return nil
	}
	return func(principal string, perSecond float64, burst int) auth.Bucket {
		return r.limits.Bucket(principal, perSecond, burst)
	}
}

// Close leaves the membership, if it joined (the other replicas drop this
// one at once), and closes the connection. A nil *Redis is closed already.
func (r *Redis) Close() {
	if r == nil {
		return
	}
	if r.limits != nil {
		r.limits.Close()
	}
	r.events.Close()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	r.members.Close(ctx)
	_ = r.store.Close()
}
