package tests

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
)

// clusterRateConfig is replica id of a cluster sharing redisURL, where
// alice may call 5 times a second with a burst of 5, counted across the
// replicas; mon reads /metrics.
func clusterRateConfig(id, redisURL string) string {
	return `
builtin: [calc]
auth:
  rate_scope: cluster
  admins: [mon]
  tokens:
    - name: alice
      token: alice-token-0123456789abcdef
      rate: 5/s
      burst: 5
    - name: mon
      token: mon-token-0123456789abcdef
cluster:
  replica_id: ` + id + `
  secret: cluster-secret-0123456789abcdef-0123456789
  redis: ` + redisURL + `
`
}

// TestClusterRate is issue 26's requirement 5: a principal's rate of 5/s,
// burst 5, through three `toolgate serve` replicas sharing one real
// redis-server for 4 s passes 25 ± 10 % of the calls; once Redis is shut
// down mid-run, each replica goes on at about rate/3, saying so once and
// counting the failures in toolgate_cluster_redis_errors_total.
func TestClusterRate(t *testing.T) {
	rs := redistest.Start(t)
	var replicas []*server
	var clients []*client.Client
	for _, id := range []string{"r1", "r2", "r3"} {
		srv := startServe(t, clusterRateConfig(id, rs.URL()))
		c, err := authClient(t, srv, "alice-token-0123456789abcdef")
		if err != nil {
			t.Fatalf("connecting to %s: %v", id, err)
		}
		replicas, clients = append(replicas, srv), append(clients, c)
	}

	// Each client calls its replica every 20 ms: 150 calls a second in
	// all, 30 times alice's rate.
	run := func(d time.Duration) []int {
		passed := make([]int, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				end := time.Now().Add(d)
				for n := 0; time.Now().Before(end); n++ {
					// Arguments that differ each time: the loop guard
					// stays out of it.
					res, err := callTool(t, c, "calc", map[string]any{"expression": fmt.Sprintf("%d+1", n)}, "")
					switch {
					case err != nil:
						t.Errorf("replica %d: tools/call: %v", i+1, err)
						return
					case !res.IsError:
						passed[i]++
					case errorClass(res) != "rate_limited":
						t.Errorf("replica %d: a call failed with %q, want rate_limited or a pass: %s", i+1, errorClass(res), resultText(res))
						return
					}
					<-tick.C
				}
			})
		}
		wg.Wait()
		return passed
	}

	passed := run(4 * time.Second)
	total := passed[0] + passed[1] + passed[2]
	t.Logf("with Redis: passed %v, %d in all", passed, total)
	if total < 23 || total > 27 {
		t.Errorf("5/s burst 5 through 3 replicas for 4 s passed %d calls (%v by replica), want 25 ± 10%% (23 to 27)", total, passed)
	}

	rc := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	_ = rc.ShutdownNoSave(t.Context()).Err() // the connection closes with no answer
	rc.Close()
	select {
	case <-rs.Exited():
	case <-time.After(stopTimeout):
		t.Fatal("redis-server did not exit on SHUTDOWN NOSAVE")
	}

	// Without Redis each replica counts alone at rate/3, burst 1 (5/3):
	// about 1 + 3 s × 5/3 = 6 calls each.
	passed = run(3 * time.Second)
	t.Logf("without Redis: passed %v", passed)
	for i, n := range passed {
		if n < 4 || n > 8 {
			t.Errorf("replica r%d passed %d calls in 3 s without Redis, want about 6 (rate/3 over 3 s, plus a burst of 1): 4 to 8", i+1, n)
		}
	}
	for i, srv := range replicas {
		if n := strings.Count(srv.Stderr(), "cluster: redis did not answer"); n != 1 {
			t.Errorf("replica r%d logged %d warnings that redis did not answer, want 1:\n%s", i+1, n, srv.Stderr())
		}
		if strings.Contains(srv.Stderr(), "redis: ") {
			t.Errorf("replica r%d let go-redis's own log lines through:\n%s", i+1, srv.Stderr())
		}
		text := scrapeWith(t, srv.URL, "mon-token-0123456789abcdef")
		if n := metricOrZero(text, "toolgate_cluster_redis_errors_total", nil); n < 1 {
			t.Errorf("replica r%d: toolgate_cluster_redis_errors_total = %v after Redis went away, want at least 1", i+1, n)
		}
	}
}

// A Redis that does not answer at start does not stop toolgate: it
// starts, says so once, and counts each principal locally at rate/N, N
// being the replicas cluster.peers lists.
func TestClusterRateRedisDownAtStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := l.Addr().String()
	l.Close() // nothing listens there now
	cfg := clusterRateConfig("r1", "redis://:redis-password-in-url@"+nothing+"/0") + `  peers: {r1: "127.0.0.1:9", r2: "127.0.0.1:9", r3: "127.0.0.1:9"}
`
	srv := startServe(t, cfg)
	c, err := authClient(t, srv, "alice-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	// 5/s burst 5 over the 3 peers: 5/3 a second, burst 1.
	if res := mustCall(t, c, "calc", map[string]any{"expression": "1+1"}, ""); res.IsError {
		t.Fatalf("the first call failed: %s", resultText(res))
	}
	res := mustCall(t, c, "calc", map[string]any{"expression": "2+1"}, "")
	wantError(t, res, "rate_limited")
	logs := srv.Stderr()
	if n := strings.Count(logs, "cluster: redis did not answer at start"); n != 1 {
		t.Errorf("logged %d warnings that redis did not answer at start, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs, "redis-password-in-url") {
		t.Errorf("the log shows the Redis URL's password:\n%s", logs)
	}
}
