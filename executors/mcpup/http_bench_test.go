package mcpup

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// quiet is Options whose logger discards: a benchmark's log is noise.
func quiet() *Options { return &Options{Logger: slog.New(slog.DiscardHandler)} }

// BenchmarkStreamableHTTPCall is one tools/call through mcpup to the fake
// upstream's echo over streamable HTTP (mcp-go's server, in a process of
// its own), one at a time: cpu-ns/op is what the upstream hop costs
// toolgate's side alone.
func BenchmarkStreamableHTTPCall(b *testing.B) {
	url, _ := httpFake(b, "http")
	m, _, _ := startUp(b, Upstream{Name: "fs", Transport: TransportStreamableHTTP, URL: url}, quiet())
	e := m.exec(b, "fs__echo")
	c := executors.Call{Tool: &registry.Tool{Name: "fs__echo", Kind: registry.MCP}, Raw: json.RawMessage(`{"text":"hello"}`)}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := e.Execute(b.Context(), c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkStreamableHTTPCallParallel is BenchmarkStreamableHTTPCall from
// 16 goroutines at once, as 16 clients' calls share one upstream.
func BenchmarkStreamableHTTPCallParallel(b *testing.B) {
	url, _ := httpFake(b, "http")
	m, _, _ := startUp(b, Upstream{Name: "fs", Transport: TransportStreamableHTTP, URL: url}, quiet())
	e := m.exec(b, "fs__echo")
	c := executors.Call{Tool: &registry.Tool{Name: "fs__echo", Kind: registry.MCP}, Raw: json.RawMessage(`{"text":"hello"}`)}
	b.ReportAllocs()
	b.SetParallelism(8) // 8×GOMAXPROCS goroutines: 16 on 2 CPUs
	start := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Execute(b.Context(), c); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
