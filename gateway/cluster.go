package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/forward"
	"github.com/toolgate/toolgate/gateway/internal/replica"
)

// replicaOf is who the gateway is among the replicas of cfg's cluster (a
// lone toolgate without one), and its peers, to which requests naming
// state they own are forwarded (nil without cluster.peers). Forwards are
// counted by owner in toolgate_cluster_forwards_total: a balancer that
// pins clients to their replica forwards none.
func replicaOf(cfg *config.Config, reg prometheus.Registerer) (*replica.Self, *forward.Peers) {
	k := cfg.Cluster
	if k == nil {
		return replica.Alone(), nil
	}
	self := replica.Member(k.ReplicaID, k.Secret, k.PreviousSecret)
	if len(k.Peers) == 0 {
		return self, nil
	}
	forwards := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_cluster_forwards_total",
		Help: "Requests forwarded to the replica owning the session or call they name, by that replica.",
	}, []string{"replica"})
	reg.MustRegister(forwards)
	peers := forward.New(k.ReplicaID, k.Peers)
	peers.Forwarded = func(owner string) { forwards.WithLabelValues(owner).Inc() }
	return self, peers
}
