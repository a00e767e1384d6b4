package cluster

import (
	"slices"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func clusterConfig(id, redisURL string, scope config.RateScope) *config.Config {
	return &config.Config{
		Server: config.Server{Listen: "127.0.0.1:8080"},
		Auth:   config.Auth{RateScope: scope},
		Cluster: &config.Cluster{ReplicaID: id, Redis: redisURL,
			Peers: map[string]string{"r1": "10.0.0.1:8080", "r2": "10.0.0.2:8080"}},
	}
}

// Without cluster.redis there is nothing to open, and nothing counts in
// Redis.
func TestOpenWithoutRedis(t *testing.T) {
	for _, cfg := range []*config.Config{{}, clusterConfig("r1", "", config.RateScopeReplica)} {
		r, err := Open(t.Context(), cfg, nil)
		if r != nil || err != nil {
			t.Errorf("Open(cluster %+v) = %v, %v; want nil, nil", cfg.Cluster, r, err)
		}
		if r.Buckets() != nil {
			t.Error("a nil Redis has buckets")
		}
		r.Close()
	}
}

// Two replicas on one Redis see each other, and with rate_scope: cluster
// share each principal's rate; with replica they leave rates to auth.
func TestOpen(t *testing.T) {
	m := miniredis.RunT(t)
	url := "redis://" + m.Addr() + "/0"
	r1, err := Open(t.Context(), clusterConfig("r1", url, config.RateScopeCluster), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r1.Join(t.Context())
	r2, err := Open(t.Context(), clusterConfig("r2", url, config.RateScopeCluster), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.Members(); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Errorf("r2.Members() before it joined = %v, want the configured peers [r1 r2]", got)
	}
	r2.Join(t.Context())
	if got := r2.Members(); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Errorf("r2.Members() = %v, want [r1 r2]", got)
	}
	if got, _ := m.Get("toolgate:member:r1"); got != "10.0.0.1:8080" {
		t.Errorf("r1's key holds %q, want its peer address 10.0.0.1:8080", got)
	}
	if d := r1.Buckets()("alice", 1, 1).Take(); d != 0 {
		t.Errorf("alice's first call on r1 waits %v, want 0", d)
	}
	if d := r2.Buckets()("alice", 1, 1).Take(); d <= 0 {
		t.Errorf("alice's second call, on r2, waits %v; want a wait: 1/s burst 1 across the cluster", d)
	}
	r2.Close()
	if m.Exists("toolgate:member:r2") {
		t.Error("r2's key is left after Close")
	}
	r3, err := Open(t.Context(), clusterConfig("r3", url, config.RateScopeReplica), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	r3.Join(t.Context())
	if r3.Buckets() != nil {
		t.Error("rate_scope: replica has cluster buckets")
	}
	if got, _ := m.Get("toolgate:member:r3"); got != "127.0.0.1:8080" {
		t.Errorf("r3 (not in peers) keeps %q, want its listen address", got)
	}
}

// A URL go-redis cannot use is an error, and no connection is left open.
func TestOpenBadURL(t *testing.T) {
	r, err := Open(t.Context(), clusterConfig("r1", "redis://127.0.0.1:6379/notadb", config.RateScopeCluster), nil)
	if err == nil {
		r.Close()
		t.Fatal("Open(redis://…/notadb) = nil error, want one")
	}
}

// A process that opens a replica's configuration without joining (a
// command run beside the replica) leaves the replica's membership alone.
func TestCloseWithoutJoin(t *testing.T) {
	m := miniredis.RunT(t)
	url := "redis://" + m.Addr() + "/0"
	replica, err := Open(t.Context(), clusterConfig("r1", url, config.RateScopeReplica), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	replica.Join(t.Context())
	command, err := Open(t.Context(), clusterConfig("r1", url, config.RateScopeReplica), nil)
	if err != nil {
		t.Fatal(err)
	}
	command.Close()
	if !m.Exists("toolgate:member:r1") {
		t.Error("closing a process that never joined removed replica r1's key")
	}
}
