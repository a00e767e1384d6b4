package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Limits of the cluster section.
const (
	minClusterSecret  = 32
	defaultDrainDelay = 5 * time.Second
	maxDrainDelay     = 5 * time.Minute
)

// replicaIDPattern is what a replica ID may be: short, and safe in a
// session ID, a header and a balancer's map key.
var replicaIDPattern = regexp.MustCompile(`^[a-z0-9-]{1,16}$`)

// Cluster makes toolgate one replica of several behind a load balancer.
// Without it toolgate is the only replica, as it always was. Every key
// that names state a replica owns (a session ID, a thread handle, a
// requestState) names that replica, and handles and requestStates are
// sealed with keys derived from Secret, so any replica can read them.
type Cluster struct {
	// ReplicaID names this replica, unique in the cluster: 1 to 16 of
	// a-z, 0-9 and -. In Kubernetes, the pod name's ordinal. Required.
	ReplicaID string `yaml:"replica_id"`
	// Secret is the cluster's shared secret, at least 32 bytes: the keys
	// of thread handles and requestStates derive from it. The same on
	// every replica; give it from the environment (${TOOLGATE_CLUSTER_SECRET}).
	// Required.
	Secret string `yaml:"secret"`
	// PreviousSecret is accepted besides Secret while rotating: handles
	// and requestStates sealed under it still open; new ones use Secret.
	// Default none.
	PreviousSecret string `yaml:"previous_secret"`
	// Peers maps each replica ID to the host:port its MCP endpoint
	// listens on. With it, a replica that receives a request for state
	// another replica owns forwards it there (one hop). Default none.
	Peers map[string]string `yaml:"peers"`
	// Redis is a redis:// or rediss:// URL: membership, auth.rate_scope:
	// cluster, and /events across replicas. Default none.
	Redis string `yaml:"redis"`
	// DrainDelay is how long, after SIGTERM, the replica reports not ready
	// while still accepting requests, so the balancer notices before the
	// listener closes. From 0 to 5m; 0 closes the listener at once, as
	// a lone toolgate does. Default 5s.
	DrainDelay *Duration `yaml:"drain_delay"`
}

// Drain is DrainDelay, or its default when unset (an explicit 0 stays 0).
func (c *Cluster) Drain() time.Duration {
	if c.DrainDelay == nil {
		return defaultDrainDelay
	}
	return time.Duration(*c.DrainDelay)
}

// RateScope says where a principal's rate limit is counted.
type RateScope string

// The rate scopes.
const (
	// RateScopeReplica counts each replica's calls on their own: N
	// replicas pass up to N times the rate.
	RateScopeReplica RateScope = "replica"
	// RateScopeCluster counts every replica's calls together, in Redis
	// (cluster.redis).
	RateScopeCluster RateScope = "cluster"
)

// cluster checks the cluster section and auth.rate_scope.
func (c *checker) cluster(cfg *Config) {
	switch cfg.Auth.RateScope {
	case "", RateScopeReplica:
	case RateScopeCluster:
		if cfg.Cluster == nil || cfg.Cluster.Redis == "" {
			c.fail("auth.rate_scope", string(cfg.Auth.RateScope), "needs cluster.redis: the replicas count calls together in Redis; set it, or use replica")
		}
	default:
		c.fail("auth.rate_scope", quoteShort(string(cfg.Auth.RateScope)), "must be replica or cluster")
	}
	k := cfg.Cluster
	if k == nil || c.broken["cluster"] {
		return
	}
	if !replicaIDPattern.MatchString(k.ReplicaID) {
		c.fail("cluster.replica_id", quoteShort(k.ReplicaID), "must be 1 to 16 of a-z, 0-9 and -, like r1; in Kubernetes, the pod name's ordinal")
	}
	if len(k.Secret) < minClusterSecret {
		c.fail("cluster.secret", "", "must be at least %d bytes, the same on every replica; generate one with `openssl rand -base64 48` and pass it from the environment, like ${TOOLGATE_CLUSTER_SECRET}", minClusterSecret)
	}
	if k.PreviousSecret != "" && len(k.PreviousSecret) < minClusterSecret {
		c.fail("cluster.previous_secret", "", "must be at least %d bytes (the secret before the rotation), or empty", minClusterSecret)
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range k.Peers {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		p := "cluster.peers." + id
		if !replicaIDPattern.MatchString(id) {
			c.fail(p, quoteShort(id), "is not a replica ID: 1 to 16 of a-z, 0-9 and -")
		}
		if !validListen(k.Peers[id]) || strings.HasPrefix(k.Peers[id], ":") {
			c.fail(p, quoteShort(k.Peers[id]), "must be the host:port of that replica's MCP endpoint, like 10.0.0.2:8080")
		}
	}
	if len(k.Peers) > 0 && k.Peers[k.ReplicaID] == "" && replicaIDPattern.MatchString(k.ReplicaID) {
		c.fail("cluster.peers", "", "must list this replica (%s) too: every replica is given the same list", k.ReplicaID)
	}
	if k.Redis != "" {
		if u, err := url.Parse(k.Redis); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			c.fail("cluster.redis", "", "must be a redis:// or rediss:// URL, like redis://127.0.0.1:6379/0")
		}
	}
	if d := k.Drain(); d < 0 || d > maxDrainDelay {
		c.fail("cluster.drain_delay", fmt.Sprint(d), "must be between 0s and %s", maxDrainDelay)
	}
}
