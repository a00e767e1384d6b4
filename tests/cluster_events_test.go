package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
)

// TestClusterEvents is issue 26's requirement 6: /events through a
// balancer that spreads calls over three replicas sharing a real
// redis-server sees every call of a 9-call run, each with an ID of its
// own that names its replica.
func TestClusterEvents(t *testing.T) {
	needProgram(t, "haproxy", "haproxy")
	rs := redistest.Start(t)
	c := startClusterWith(t, "builtin: [calc]\n", true, fmt.Sprintf("  redis: %q\n", rs.URL()))
	t.Cleanup(func() { stopAll(t, c.replicas) })
	lb := startHAProxy(t, "testdata/lb/haproxy-roundrobin.cfg", c.addrs)

	// Each replica relays once subscribed to the channel.
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rc.Close()
	pollUntil(t, listenTimeout, "three replicas on the events channel", func() (bool, string) {
		n, err := rc.PubSubNumSub(t.Context(), "toolgate:events").Result()
		return err == nil && n["toolgate:events"] == 3, fmt.Sprintf("%v %v", n, err)
	})

	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lb.URL+"/events?outcome=ok", nil)
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events through the balancer: HTTP %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && lines.Text() != ": subscribed" {
	}

	for i := range 9 {
		if _, err := post2026(ctx, lb.URL, "calc", fmt.Sprintf(`{"expression":"%d+1"}`, i)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	ids, replicas := map[string]bool{}, map[string]bool{}
	for len(ids) < 9 && lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct{ ID, State string }
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if ids[e.ID] {
			t.Fatalf("call ID %s seen twice", e.ID)
		}
		ids[e.ID] = true
		if r, _, ok := strings.Cut(strings.TrimPrefix(e.ID, "c-"), "-"); ok {
			replicas[r] = true
		}
	}
	if len(ids) < 9 {
		t.Fatalf("/events through the balancer saw %d of 9 calls (%v): %v", len(ids), ids, lines.Err())
	}
	if len(replicas) != 3 {
		t.Errorf("the calls' IDs name replicas %v, want r1, r2 and r3: round robin spread them", replicas)
	}
	for i, r := range c.replicas {
		if n := metricOrZero(scrape(t, r.URL), "toolgate_cluster_events_dropped_total", nil); n != 0 {
			t.Errorf("replica r%d dropped %v events", i+1, n)
		}
	}
}
