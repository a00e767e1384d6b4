package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// cacheMetaKey marks a result served from a result cache.
const cacheMetaKey = "toolgate/cache"

// countingAPI counts the requests of each path; /missing answers 404,
// every other path its path and how many requests it has had.
type countingAPI struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int // guarded by mu
}

func startCountingAPI(t *testing.T) *countingAPI {
	t.Helper()
	a := &countingAPI{n: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.n[r.URL.Path]++
		n := a.n[r.URL.Path]
		a.mu.Unlock()
		if r.URL.Path == "/missing" {
			http.Error(w, "no such thing", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q,"n":%d}`, r.URL.Path, n)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *countingAPI) count(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[path]
}

func cacheHit(res *mcp.CallToolResult) bool {
	return res.Meta != nil && res.Meta.AdditionalFields[cacheMetaKey] == "hit"
}

// TestResultCacheE2E runs the real binary with cached REST tools in front
// of a backend that counts its requests: ten identical GET calls within
// the ttl reach it once, and a call after the ttl again; a POST tool and
// a failing tool are never cached; two principals do not share a private
// cache, and do share a public one; /metrics counts hits and misses.
func TestResultCacheE2E(t *testing.T) {
	api := startCountingAPI(t)
	const ttl = 3 * time.Second
	// The loop guard would stop a session repeating one call; this test
	// repeats calls on purpose.
	srv := startServe(t, fmt.Sprintf(`
guards: {loop: {action: off}}
auth:
  admins: [alice]
  tokens:
    - {name: alice, token: alice-token-0123456789abcdef}
    - {name: bob, token: bob-token-0123456789abcdef}
rest:
  - {name: item, url: "%[1]s/item/{id}", cache: {ttl: %[2]s}}
  - {name: create, method: POST, url: "%[1]s/create", body: {id: "{id}"}}
  - {name: missing, url: "%[1]s/missing", retry: {attempts: 1}, cache: {ttl: 1h}}
  - {name: own, url: "%[1]s/own", cache: {ttl: 1h}}
  - {name: shared, url: "%[1]s/shared", cache: {ttl: 1h, public: true}}
`, api.srv.URL, ttl))
	alice, err := authClient(t, srv, "alice-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := authClient(t, srv, "bob-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var first string
	for i := range 10 {
		res := mustCall(t, alice, "item", map[string]any{"id": "a"}, "")
		if res.IsError {
			t.Fatalf("item call %d: %s", i, resultText(res))
		}
		if i == 0 {
			first = resultText(res)
		} else if !cacheHit(res) || resultText(res) != first {
			t.Fatalf("item call %d = %q, _meta %+v; want the first result, from the cache", i, resultText(res), res.Meta)
		}
	}
	if took := time.Since(start); took >= ttl {
		t.Fatalf("the 10 calls took %v, more than the ttl (%v): the machine is too slow for this test", took, ttl)
	}
	if n := api.count("/item/a"); n != 1 {
		t.Fatalf("10 identical calls within the ttl reached the backend %d times, want 1", n)
	}
	// After the ttl, the next call reaches the backend again: call until
	// one is not a hit.
	deadline := time.Now().Add(ttl + pollTimeout)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for cacheHit(mustCall(t, alice, "item", map[string]any{"id": "a"}, "")) {
		if time.Now().After(deadline) {
			t.Fatalf("still served from the cache %v after the ttl", pollTimeout)
		}
		<-ticker.C
	}
	if n := api.count("/item/a"); n != 2 {
		t.Fatalf("after the ttl the backend had %d requests, want 2", n)
	}

	for range 10 {
		mustCall(t, alice, "create", map[string]any{"id": "a"}, "")
	}
	if n := api.count("/create"); n != 10 {
		t.Errorf("10 calls of the POST tool reached the backend %d times, want 10", n)
	}
	for range 3 {
		if res := mustCall(t, alice, "missing", map[string]any{}, ""); !res.IsError || cacheHit(res) {
			t.Fatalf("missing = %q (cache hit %v), want a failure from the backend", resultText(res), cacheHit(res))
		}
	}
	if n := api.count("/missing"); n != 3 {
		t.Errorf("3 calls of a failing tool reached the backend %d times, want 3 (failures are never cached)", n)
	}

	for _, cl := range []*client.Client{alice, bob, alice, bob} {
		mustCall(t, cl, "own", map[string]any{}, "")
		mustCall(t, cl, "shared", map[string]any{}, "")
	}
	if n := api.count("/own"); n != 2 {
		t.Errorf("two principals, twice each: the private cache's backend had %d requests, want 2 (one each)", n)
	}
	if n := api.count("/shared"); n != 1 {
		t.Errorf("two principals, twice each: the public cache's backend had %d requests, want 1", n)
	}

	metrics := scrapeWith(t, srv.URL, "alice-token-0123456789abcdef")
	for _, m := range []struct {
		tool, result string
		want         float64
	}{{"item", "hit", 9}, {"item", "miss", 2}, {"missing", "miss", 3}, {"own", "hit", 2}, {"shared", "hit", 3}} {
		labels := map[string]string{"tool": m.tool, "result": m.result}
		got, _ := metricValue(metrics, "toolgate_cache_requests_total", labels)
		if m.tool == "item" && m.result == "hit" {
			// The polling after the ttl adds its hits.
			if got < m.want {
				t.Errorf("toolgate_cache_requests_total%s = %v, want at least %v", fmtLabels(labels), got, m.want)
			}
			continue
		}
		if got != m.want {
			t.Errorf("toolgate_cache_requests_total%s = %v, want %v", fmtLabels(labels), got, m.want)
		}
	}
	if _, ok := metricValue(metrics, "toolgate_cache_requests_total", map[string]string{"tool": "create", "result": "miss"}); ok {
		t.Error("the POST tool is counted in toolgate_cache_requests_total")
	}
	if v, _ := metricValue(metrics, "toolgate_cache_bytes", nil); v <= 0 {
		t.Errorf("toolgate_cache_bytes = %v with entries held, want more than 0", v)
	}
	if !strings.Contains(srv.Stderr(), `"cache":"hit"`) {
		t.Error("no log line says a call was a cache hit")
	}
}
