package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// benchSession initialises a streamable-HTTP session on url and returns a
// function that makes one tools/call of echo over it.
func benchSession(b *testing.B, url string) func() {
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
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, toolgate"}}}`
	if _, out := post(sid, call); !strings.Contains(string(out), "hello, toolgate") {
		b.Fatalf("tools/call echo = %s", out)
	}
	return func() { post(sid, call) }
}

// BenchmarkHTTPCall is one tools/call over loopback HTTP through toolgate;
// compare with BenchmarkHTTPCallBare, the same call to a bare mcp-go server.
func BenchmarkHTTPCall(b *testing.B) {
	g := newBenchGateway(b)
	srv := httptest.NewServer(g.Handler())
	b.Cleanup(srv.Close)
	b.Cleanup(func() { g.Close() })
	call := benchSession(b, srv.URL+"/mcp")
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}

func BenchmarkHTTPCallBare(b *testing.B) {
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
	call := benchSession(b, srv.URL)
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}
