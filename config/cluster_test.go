package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const clusterSecret = "0123456789abcdef0123456789abcdef-cluster"

func TestParseCluster(t *testing.T) {
	cfg, err := Parse("t.yaml", yamlLines(
		"cluster:",
		"  replica_id: r1",
		"  secret: ${SECRET}",
		"  peers: {r1: '10.0.0.1:8080', r2: '10.0.0.2:8080'}",
		"  redis: redis://127.0.0.1:6379/0",
		"auth:",
		"  rate_scope: cluster",
	), &Options{LookupEnv: envOf(map[string]string{"SECRET": clusterSecret})})
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Cluster
	if k == nil || k.ReplicaID != "r1" || k.Secret != clusterSecret || len(k.Peers) != 2 || k.Drain() != 5*time.Second || cfg.Auth.RateScope != RateScopeCluster {
		t.Fatalf("cluster = %+v, rate scope %q", k, cfg.Auth.RateScope)
	}
	if !slicesHas(cfg.Secrets(), clusterSecret) {
		t.Error("the cluster secret is not among the secrets to redact")
	}
	if cfg, err := Parse("t.yaml", yamlLines("server: {listen: '127.0.0.1:8080'}"), nil); err != nil || cfg.Cluster != nil {
		t.Errorf("no cluster section: %v, %+v; want one replica (nil)", err, cfg.Cluster)
	}
}

// drain_delay: absent is the default, 5s; an explicit 0 is 0, the
// listener closing at once.
func TestClusterDrainDelay(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 5 * time.Second, "  drain_delay: 0s": 0, "  drain_delay: 2s": 2 * time.Second} {
		lines := []string{"cluster:", "  replica_id: r1", "  secret: " + clusterSecret}
		if in != "" {
			lines = append(lines, in)
		}
		cfg, err := Parse("t.yaml", yamlLines(lines...), nil)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got := cfg.Cluster.Drain(); got != want {
			t.Errorf("%q: Drain() = %v, want %v", in, got, want)
		}
	}
}

func TestParseClusterErrors(t *testing.T) {
	env := map[string]string{"SHORT": "too-short", "SECRET": clusterSecret}
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{"identity and secret", yamlLines(
			"cluster:",
			"  replica_id: Replica_1",
			"  secret: ${SHORT}",
			"  previous_secret: old",
			"  drain_delay: 10m",
		), []string{
			`t.yaml:2:15: cluster.replica_id: must be 1 to 16 of a-z, 0-9 and -, like r1; in Kubernetes, the pod name's ordinal; got "Replica_1"`,
			"t.yaml:3:11: cluster.secret: must be at least 32 bytes, the same on every replica; generate one with `openssl rand -base64 48` and pass it from the environment, like ${TOOLGATE_CLUSTER_SECRET} (value came from ${SHORT})",
			"t.yaml:4:20: cluster.previous_secret: must be at least 32 bytes (the secret before the rotation), or empty",
			"t.yaml:5:16: cluster.drain_delay: must be between 0s and 5m0s; got 10m0s",
		}},
		{"peers and redis", yamlLines(
			"cluster:",
			"  replica_id: r1",
			"  secret: ${SECRET}",
			"  peers: {r2: ':8080', R3: '10.0.0.3:8080'}",
			"  redis: http://127.0.0.1:6379",
		), []string{
			"t.yaml:4:3: cluster.peers: must list this replica (r1) too: every replica is given the same list",
			`t.yaml:4:15: cluster.peers.r2: must be the host:port of that replica's MCP endpoint, like 10.0.0.2:8080; got ":8080"`,
			`t.yaml:4:28: cluster.peers.R3: is not a replica ID: 1 to 16 of a-z, 0-9 and -; got "R3"`,
			"t.yaml:5:10: cluster.redis: must be a redis:// or rediss:// URL, like redis://127.0.0.1:6379/0",
		}},
		{"rate scope", yamlLines(
			"auth:",
			"  rate_scope: cluster",
		), []string{
			"t.yaml:2:15: auth.rate_scope: needs cluster.redis: the replicas count calls together in Redis; set it, or use replica; got cluster",
		}},
		{"rate scope name", yamlLines(
			"auth:",
			"  rate_scope: global",
		), []string{
			`t.yaml:2:15: auth.rate_scope: must be replica or cluster; got "global"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", tc.in, &Options{LookupEnv: envOf(env)})
			if diff := cmp.Diff(tc.want, errLines(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if err != nil && (strings.Contains(err.Error(), "too-short") || strings.Contains(err.Error(), clusterSecret)) {
				t.Error("an error shows a secret")
			}
		})
	}
}
