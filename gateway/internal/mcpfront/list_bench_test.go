package mcpfront

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// BenchmarkToolsListPage measures one 100-tool page of tools/list over
// streamable HTTP in a session, with 5,000 tools served (each with a
// small schema), the middle page of the list.
func BenchmarkToolsListPage(b *testing.B) {
	f := New(&fakeBackend{reg: registry.New()}, Options{Name: "toolgate", Version: "bench", MCPPath: "/mcp",
		MaxSessions: 10, MaxBodyBytes: 1 << 20, ReadTimeout: 10 * time.Second})
	b.Cleanup(f.Close)
	tools := make([]Tool, 5000)
	for i := range tools {
		tools[i] = Tool{Def: &registry.Tool{Name: fmt.Sprintf("up__tool_%04d", i), Source: "up", Description: "a tool of the upstream",
			InputSchema: []byte(`{"type":"object","properties":{"q":{"type":"string","description":"what to look for"},"n":{"type":"integer"}},"required":["q"]}`)},
			Call: func(context.Context, *Request) *executors.Result { return new(executors.Text("ok")) }}
	}
	f.SetTools(tools, nil)
	mux := http.NewServeMux()
	f.Mount(mux)
	post := func(sid, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	sid := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`).Header().Get("Mcp-Session-Id")
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// The cursor after up__tool_2499: base64 of that name.
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"dXBfX3Rvb2xfMjQ5OQ=="}}`
	if rec := post(sid, body); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "up__tool_2599") {
		b.Fatalf("tools/list: %d %.300s", rec.Code, rec.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		post(sid, body)
	}
}
