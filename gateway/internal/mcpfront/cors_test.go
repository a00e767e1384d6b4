package mcpfront

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
)

// TestSSEStreamKeepsToolgateOrigin checks that the front's SSE stream
// carries the Access-Control-Allow-Origin toolgate set, or none, never
// mcp-go's "*".
func TestSSEStreamKeepsToolgateOrigin(t *testing.T) {
	for _, set := range []string{"", "https://app.example"} {
		h, _ := newGateway(t, nil)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if set != "" {
				w.Header().Set(headerACAO, set)
			}
			h.Handler().ServeHTTP(w, r)
		}))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/sse", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /sse = %d", resp.StatusCode)
		}
		if got := resp.Header.Values(headerACAO); set == "" && len(got) != 0 || set != "" && (len(got) != 1 || got[0] != set) {
			t.Errorf("toolgate set Access-Control-Allow-Origin %q; the stream sent %q", set, got)
		}
		resp.Body.Close()
		cancel()
		h.Close()
		srv.Close()
	}
}

// TestCORS checks what a page on an allowed origin needs to use the MCP
// endpoints (preflights answered, responses readable, the session ID
// exposed) and that other origins are refused naming
// server.allowed_origins.
func TestCORS(t *testing.T) {
	const app, evil = "https://app.example", "https://evil.example"
	h, _ := newGateway(t, func(c *config.Config) { c.Server.AllowedOrigins = []string{app} })
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	do := func(method, path, origin, body string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Origin", origin)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp, "" // a live stream: the header is enough
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	preflight := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,mcp-session-id"}
	for _, path := range []string{"/mcp", "/sse", "/message"} {
		resp, body := do(http.MethodOptions, path, app, "", preflight)
		want := map[string]string{
			"Access-Control-Allow-Origin":   app,
			"Access-Control-Allow-Methods":  "GET, POST, DELETE",
			"Access-Control-Allow-Headers":  "Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Authorization, Last-Event-ID, Mcp-Method, Mcp-Name",
			"Access-Control-Expose-Headers": "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate",
			"Vary":                          "Origin",
		}
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("preflight of %s from %s = %d, want 204: %s", path, app, resp.StatusCode, body)
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("preflight of %s from %s: %s = %q, want %q", path, app, k, got, v)
			}
		}
		// A 2026-07-28 page's tool parameters in Mcp-Param-* headers.
		resp, _ = do(http.MethodOptions, path, app, "", map[string]string{"Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "content-type,mcp-method,mcp-name,mcp-param-region,x-other"})
		if got := resp.Header.Get("Access-Control-Allow-Headers"); !strings.HasSuffix(got, "Mcp-Name, mcp-param-region") {
			t.Errorf("preflight of %s asking for mcp-param-region: Access-Control-Allow-Headers %q", path, got)
		}
		resp, body = do(http.MethodOptions, path, evil, "", preflight)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "server.allowed_origins") || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s from %s = %d %q (Access-Control-Allow-Origin %q), want 403 naming server.allowed_origins",
				path, evil, resp.StatusCode, body, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`
	post := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Sec-Fetch-Site": "cross-site"}
	resp, body := do(http.MethodPost, "/mcp", app, initialize, post)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize from %s = %d %s, want 200 with a session", app, resp.StatusCode, body)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != app {
		t.Errorf("initialize from %s: Access-Control-Allow-Origin %q", app, got)
	}
	if got := resp.Header.Get("Access-Control-Expose-Headers"); !strings.Contains(got, "Mcp-Session-Id") {
		t.Errorf("initialize from %s: Access-Control-Expose-Headers %q does not expose Mcp-Session-Id", app, got)
	}
	resp, body = do(http.MethodPost, "/mcp", evil, initialize, post)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "server.allowed_origins") || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("initialize from %s = %d %q, want 403 naming server.allowed_origins", evil, resp.StatusCode, body)
	}
	resp, _ = do(http.MethodGet, "/sse", app, "", nil)
	if got := resp.Header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != app {
		t.Errorf("GET /sse from %s: Access-Control-Allow-Origin %q, want only %q", app, got, app)
	}
}
