package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/toolgate/toolgate/config"
)

// Gateways sharing one Redis with auth.rate_scope: cluster count a
// principal's calls together; with Redis gone each counts alone at
// rate/N, N the replicas that joined, and counts the failures in
// toolgate_cluster_redis_errors_total. Close leaves nothing running
// (goleak, TestMain).
func TestClusterRate(t *testing.T) {
	m := miniredis.RunT(t)
	replica := func(id string) *Gateway {
		g := authGateway(t, func(c *config.Config) {
			c.Auth.Tokens[1].Rate, c.Auth.Tokens[1].Burst = "1/h", 2 // bob
			c.Auth.Tokens[2].Rate, c.Auth.Tokens[2].Burst = "1/h", 2 // ops
			c.Auth.RateScope = config.RateScopeCluster
			c.Cluster = &config.Cluster{ReplicaID: id, Secret: strings.Repeat("s", 32), Redis: "redis://" + m.Addr() + "/0"}
		})
		return g
	}
	r1, r2 := replica("r1"), replica("r2")
	// Serving HTTP, each joins the membership; r1 joins last, so it has
	// read both.
	r2.Handler()
	r1.Handler()
	call := func(g *Gateway, principal string) string {
		t.Helper()
		ctx := WithPrincipal(t.Context(), principal)
		res, err := g.Call(ctx, "echo", json.RawMessage(`{"text":"x"}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		return errorClass(res)
	}
	for i, tc := range []struct {
		g    *Gateway
		want string
	}{{r1, ""}, {r2, ""}, {r1, "rate_limited"}, {r2, "rate_limited"}} {
		if got := call(tc.g, "bob"); got != tc.want {
			t.Errorf("call %d with Redis = class %q, want %q (1/h burst 2 across both)", i+1, got, tc.want)
		}
	}
	m.Close()
	// bob's refusal stands: Redis said when a token would be there.
	if got := call(r1, "bob"); got != "rate_limited" {
		t.Errorf("bob's call without Redis = class %q, want rate_limited", got)
	}
	// ops, never refused, is counted alone: 1/h over 2 replicas, a burst
	// of 1 each.
	for i, want := range []string{"", "rate_limited"} {
		if got := call(r1, "ops"); got != want {
			t.Errorf("ops's call %d on r1 without Redis = class %q, want %q (rate/2, burst 1)", i+1, got, want)
		}
	}
	families, err := r1.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var errs float64
	for _, f := range families {
		if f.GetName() == "toolgate_cluster_redis_errors_total" {
			errs = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if errs < 1 {
		t.Errorf("toolgate_cluster_redis_errors_total = %v after Redis went away, want at least 1", errs)
	}
}

// Without a cluster nothing of Redis is made, and the counter is not
// among the metrics.
func TestNoClusterNoRedis(t *testing.T) {
	g, _ := newGateway(t, nil)
	if g.redis != nil {
		t.Fatal("a gateway without a cluster section has a Redis")
	}
	families, err := g.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "toolgate_cluster_redis") {
			t.Errorf("metric %s without a cluster", f.GetName())
		}
	}
}
