package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
)

// benchSession initialises a streamable-HTTP session on url and returns a
// function that makes one tools/call of tool (an echo) over it.
func benchSession(b *testing.B, url, tool string) func() {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(client.CloseIdleConnections)
	post := func(sid, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, out
	}
	resp, _ := post("", fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, mcp.ProtocolVersion20251125))
	sid := resp.Header.Get("Mcp-Session-Id")
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	n := 0
	return func() {
		n++
		_, out := post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"text":"hello, toolgate `+strconv.Itoa(n)+`"}}}`)
		checkEcho(b, tool, n, out)
	}
}

// checkEcho fails b unless out, the answer to call n of an echo tool,
// holds the text it was sent. Each call sends a text of its own: the loop
// guard (on, as configured by default) refuses the fourth identical call
// in a row of a session, and a benchmark of identical calls would measure
// that refusal.
func checkEcho(b *testing.B, tool string, n int, out []byte) {
	b.Helper()
	if !bytes.Contains(out, []byte(`"hello, toolgate `+strconv.Itoa(n)+`"`)) {
		b.Fatalf("tools/call %s, call %d = %s; want the text echoed", tool, n, out)
	}
}

// BenchmarkHTTPCall is one tools/call over loopback HTTP through toolgate;
// compare with BenchmarkHTTPCallBare, the same call to a bare mcp-go server.
func BenchmarkHTTPCall(b *testing.B) {
	g := newBenchGateway(b)
	srv := httptest.NewServer(g.Handler())
	b.Cleanup(srv.Close)
	b.Cleanup(func() { g.Close() })
	call := benchSession(b, srv.URL+"/mcp", "echo")
	measureCalls(b, call)
}

func BenchmarkHTTPCallBare(b *testing.B) {
	call := benchSession(b, bareEchoServer(b).URL, "echo")
	measureCalls(b, call)
}

// BenchmarkHTTPCallModern is BenchmarkHTTPCall's call as a 2026-07-28
// request (no session; version, client info and capabilities in _meta,
// Mcp-Method and Mcp-Name headers), through the same toolgate. The issue
// asks the 2026-07-28 path to stay within 0.9x of the 2025 one: compare
// the two in one run.
func BenchmarkHTTPCallModern(b *testing.B) {
	g := newBenchGateway(b)
	srv := httptest.NewServer(g.Handler())
	b.Cleanup(srv.Close)
	b.Cleanup(func() { g.Close() })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(client.CloseIdleConnections)
	meta := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
		mcp.ProtocolVersion20260728)
	n := 0
	call := func() {
		n++
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, toolgate ` + strconv.Itoa(n) + `"},` + meta
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, "tools/call")
		req.Header.Set(mcp.HeaderName, "echo")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		checkEcho(b, "echo", n, out)
	}
	measureCalls(b, call)
}

// measureCalls runs call b.N times, reporting allocations and cpu-ns/op.
func measureCalls(b *testing.B, call func()) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		call()
	}
	reportCPU(b, start)
}

// cpuTime is the CPU time this process has used, server and client alike.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per call since start as
// cpu-ns/op: unlike sec/op, it does not move with the machine's other
// load, so runs of these benchmarks on a shared machine compare.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// bareEchoServer is a bare mcp-go streamable HTTP server with one echo
// tool, as BenchmarkHTTPCallBare measures it.
func bareEchoServer(b *testing.B) *httptest.Server {
	b.Helper()
	s := server.NewMCPServer("bare", "1")
	s.AddTool(mcp.NewToolWithRawSchema("echo", "echo", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetArguments()["text"].(string)), nil
		})
	h := server.NewStreamableHTTPServer(s, server.WithStateful(true),
		server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20251125))
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	b.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	return srv
}

// BenchmarkHTTPCallUpstream is BenchmarkHTTPCall's call to an upstream
// MCP server's echo (a bare mcp-go server over streamable HTTP, as in
// BenchmarkHTTPCallBare) through toolgate, with the whole pipeline on.
// Its cpu-ns/op less BenchmarkHTTPCallBare's is toolgate's own CPU per
// proxied call: client, toolgate and upstream share this process.
func BenchmarkHTTPCallUpstream(b *testing.B) {
	up := bareEchoServer(b)
	cfg, err := config.Parse("bench.yaml", []byte(fmt.Sprintf(`
upstreams:
  - name: up
    transport: streamable-http
    url: %s
guards:
  loop:
    tools:
      up__echo: "off"
`, up.URL)), nil)
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(g.Handler())
	b.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.StartUpstreams()
	if err := g.WaitUpstreams(ctx); err != nil {
		b.Fatal(err)
	}
	call := benchSession(b, srv.URL+"/mcp", "up__echo")
	measureCalls(b, call)
}
