package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/cluster"
)

// openRedis connects g to cfg's cluster.redis, when it has one
// (internal/cluster: the membership, and the principals' rates with
// auth.rate_scope: cluster, the relay of call events); g.redis stays nil
// otherwise. It returns the counters of failed Redis operations
// (toolgate_cluster_redis_errors_total) and of call events the relay
// dropped (toolgate_cluster_events_dropped_total), for the metrics to
// register once they exist. The error is for a Redis
// URL that cannot be used; a Redis that does not answer is none.
func (g *Gateway) openRedis(cfg *config.Config) ([]prometheus.Collector, error) {
	errs := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_cluster_redis_errors_total",
		Help: "Operations on the cluster's Redis that failed; meanwhile each replica counts rate limits locally at rate/N.",
	})
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_cluster_events_dropped_total",
		Help: "Call events not relayed to the other replicas' /events and /ui: the relay's queue was full or Redis did not take them.",
	})
	var err error
	g.redis, err = cluster.Open(g.root, cfg, &cluster.Options{
		Logger: g.logger, OnRedisError: errs.Inc,
		DeliverEvent: g.deliverEvent, OnEventDropped: dropped.Inc,
	})
	return []prometheus.Collector{errs, dropped}, err
}
