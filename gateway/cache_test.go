package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
)

// fakeClock is the result caches' clock in these tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

// withCacheClock gives the result caches the clock now.
func withCacheClock(now func() time.Time) Option { return func(o *options) { o.cacheNow = now } }

// countingBackend counts the requests of each path; /missing answers 404,
// everything else the path, the query and the count so far.
func countingBackend(t *testing.T) (string, *sync.Map) {
	t.Helper()
	var counts sync.Map // path → *atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := counts.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n := v.(*atomic.Int64).Add(1)
		if r.URL.Path == "/missing" {
			http.Error(w, "no such thing", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q,"query":%q,"n":%d,"note":"secret"}`, r.URL.Path, r.URL.RawQuery, n)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &counts
}

func hits(counts *sync.Map, path string) int64 {
	if v, ok := counts.Load(path); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// cachedGateway is a gateway of cfg's sources whose caches tell time by
// the returned clock.
func cachedGateway(t *testing.T, cfg *config.Config) (*Gateway, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g, err := New(cfg, withCacheClock(clk.Now))
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g, clk
}

// callAs calls tool with args as principal, through the whole pipeline.
func callAs(t *testing.T, g *Gateway, principal, tool, args string) *Result {
	t.Helper()
	r, err := g.lookup(tool)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.handle(t.Context(), &Call{Name: tool, route: r, Raw: json.RawMessage(args), Principal: principal})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res
}

// cacheCount is toolgate_cache_requests_total{tool, result}, as gathered.
func cacheCount(t *testing.T, g *Gateway, tool, result string) float64 {
	t.Helper()
	mfs, err := g.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolgate_cache_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == tool && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestResultCacheREST: ten identical calls of a cached GET tool within
// the ttl reach the backend once, and the eleventh, after it, again; the
// same arguments written another way are the same call, other arguments
// another; a POST tool is never cached, nor is a failure.
func TestResultCacheREST(t *testing.T) {
	url, counts := countingBackend(t)
	g, clk := cachedGateway(t, parseYAML(t,
		"rest:",
		"  - {name: item, url: '"+url+"/item', query: {id: '{id}', v: '{v}'}, cache: {ttl: 30s}}",
		"  - {name: create, method: POST, url: '"+url+"/create', body: {id: '{id}'}}",
		"  - {name: missing, url: '"+url+"/missing', retry: {attempts: 1}, cache: {ttl: 30s}}",
	))
	var first string
	for i := range 10 {
		args := `{"id":"a","v":"1"}`
		if i%2 == 1 {
			args = `{ "v": "1", "id": "a" }` // the same arguments, written otherwise
		}
		res := callAs(t, g, "", "item", args)
		if res.IsError {
			t.Fatalf("call %d: %s", i, res.Text())
		}
		if i == 0 {
			first = res.Text()
			if _, ok := res.Meta[CacheMetaKey]; ok {
				t.Fatalf("the first call's _meta = %v, want no %s", res.Meta, CacheMetaKey)
			}
			continue
		}
		if res.Text() != first || res.Meta[CacheMetaKey] != "hit" {
			t.Fatalf("call %d: %q, _meta %v; want the first result, %s hit", i, res.Text(), res.Meta, CacheMetaKey)
		}
	}
	if n := hits(counts, "/item"); n != 1 {
		t.Fatalf("the backend got %d requests for 10 identical calls within the ttl, want 1", n)
	}
	callAs(t, g, "", "item", `{"id":"b","v":"1"}`)
	if n := hits(counts, "/item"); n != 2 {
		t.Fatalf("other arguments: the backend got %d requests in all, want 2", n)
	}
	clk.Advance(30 * time.Second)
	if res := callAs(t, g, "", "item", `{"id":"a","v":"1"}`); res.Meta[CacheMetaKey] != nil || hits(counts, "/item") != 3 {
		t.Fatalf("after the ttl: _meta %v, %d requests in all; want a miss reaching the backend (3)", res.Meta, hits(counts, "/item"))
	}
	if h, m := cacheCount(t, g, "item", "hit"), cacheCount(t, g, "item", "miss"); h != 9 || m != 3 {
		t.Errorf("toolgate_cache_requests_total{tool=item}: hit %v, miss %v; want 9 and 3", h, m)
	}

	for range 10 {
		callAs(t, g, "", "create", `{"id":"a"}`)
	}
	if n := hits(counts, "/create"); n != 10 {
		t.Errorf("the POST tool's backend got %d requests for 10 calls, want 10 (never cached)", n)
	}
	for range 3 {
		if res := callAs(t, g, "", "missing", `{}`); !res.IsError {
			t.Fatalf("missing = %s, want an error", res.Text())
		}
	}
	if n := hits(counts, "/missing"); n != 3 {
		t.Errorf("a failing tool's backend got %d requests for 3 calls, want 3 (failures never cached)", n)
	}
	if g.caches.Bytes() <= 0 {
		t.Error("toolgate_cache_bytes is 0 with entries held")
	}
}

// TestResultCachePrincipals: each principal has its own entries unless
// the cache is public.
func TestResultCachePrincipals(t *testing.T) {
	url, counts := countingBackend(t)
	g, _ := cachedGateway(t, parseYAML(t,
		"rest:",
		"  - {name: own, url: '"+url+"/own', cache: {ttl: 30s}}",
		"  - {name: shared, url: '"+url+"/shared', cache: {ttl: 30s, public: true}}",
	))
	for _, p := range []string{"alice", "bob", "alice", "bob"} {
		callAs(t, g, p, "own", `{}`)
		callAs(t, g, p, "shared", `{}`)
	}
	if n := hits(counts, "/own"); n != 2 {
		t.Errorf("a private cache: the backend got %d requests from two principals, want 2", n)
	}
	if n := hits(counts, "/shared"); n != 1 {
		t.Errorf("a public cache: the backend got %d requests from two principals, want 1", n)
	}
}

// TestResultCacheHooksAndReload: a hit passes through the hooks as they
// are now (the cache keeps the result before them); a reload that
// changes the tool's cache drops its entries, one that leaves it keeps
// them.
func TestResultCacheHooksAndReload(t *testing.T) {
	url, counts := countingBackend(t)
	tool := "  - {name: item, url: '" + url + "/item', cache: {ttl: 30s}}"
	redact := []string{"hooks:", "  - {type: redact, patterns: [secret]}"}
	g, _ := cachedGateway(t, parseYAML(t, append([]string{"rest:", tool}, redact...)...))
	if res := callAs(t, g, "", "item", `{}`); !strings.Contains(res.Text(), "[redacted]") {
		t.Fatalf("item = %s, want the note redacted", res.Text())
	}
	if _, err := g.Apply(parseYAML(t, "rest:", tool)); err != nil {
		t.Fatalf("Apply = %v", err)
	}
	res := callAs(t, g, "", "item", `{}`)
	if res.Meta[CacheMetaKey] != "hit" || !strings.Contains(res.Text(), `"secret"`) {
		t.Fatalf("after the hook was removed: %s, _meta %v; want a hit without redaction", res.Text(), res.Meta)
	}
	if _, err := g.Apply(parseYAML(t, "rest:", "  - {name: item, url: '"+url+"/item', cache: {ttl: 1m}}")); err != nil {
		t.Fatalf("Apply = %v", err)
	}
	if res := callAs(t, g, "", "item", `{}`); res.Meta[CacheMetaKey] != nil || hits(counts, "/item") != 2 {
		t.Fatalf("after the cache changed: _meta %v, %d requests; want a miss (2)", res.Meta, hits(counts, "/item"))
	}
	if _, err := g.Apply(parseYAML(t, "rest:", "  - {name: item, url: '"+url+"/item'}")); err != nil {
		t.Fatalf("Apply = %v", err)
	}
	callAs(t, g, "", "item", `{}`)
	callAs(t, g, "", "item", `{}`)
	if n := hits(counts, "/item"); n != 4 {
		t.Fatalf("after the cache was removed: %d requests, want 4 (no cache)", n)
	}
}

// TestResultCacheUpstream: an upstream's cache holds the results of its
// tools whose readOnlyHint is true, never the others'.
func TestResultCacheUpstream(t *testing.T) {
	var reads, writes atomic.Int64
	s := server.NewMCPServer("up", "1")
	s.AddTool(mcp.NewTool("read", mcp.WithReadOnlyHintAnnotation(true)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprint("read ", reads.Add(1))), nil
	})
	s.AddTool(mcp.NewTool("write", mcp.WithReadOnlyHintAnnotation(false), mcp.WithIdempotentHintAnnotation(true)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(fmt.Sprint("write ", writes.Add(1))), nil
	})
	h := server.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	g, _ := cachedGateway(t, parseYAML(t,
		"upstreams:",
		"  - {name: up, transport: streamable-http, url: '"+srv.URL+"', cache: {ttl: 30s}}",
	))
	g.StartUpstreams()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := g.WaitUpstreams(ctx); err != nil {
		t.Fatalf("WaitUpstreams = %v", err)
	}
	for range 5 {
		for _, tool := range []string{"up__read", "up__write"} {
			res, err := g.Call(ctx, tool, nil, nil)
			if err != nil || res.IsError {
				t.Fatalf("%s = %v, %v", tool, res, err)
			}
		}
	}
	if reads.Load() != 1 || writes.Load() != 5 {
		t.Errorf("5 calls each: read ran %d times, write %d; want 1 and 5", reads.Load(), writes.Load())
	}
	res, _ := g.Call(ctx, "up__read", nil, nil)
	if res.Text() != "read 1" || res.Meta[CacheMetaKey] != "hit" {
		t.Errorf("a hit = %q, _meta %v; want the first result, marked", res.Text(), res.Meta)
	}
}
