package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLoopbackHostRule checks that the endpoints showing tool, upstream
// and backend names or call data refuse a request that reached a loopback
// address naming another Host (DNS rebinding), as the MCP endpoints do;
// /healthz, which shows nothing, answers any Host.
func TestLoopbackHostRule(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g) // listens on 127.0.0.1
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	get := func(path, host string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s with Host %s: %v", path, host, err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp.StatusCode, "" // a live stream: the status is enough
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/metrics", "/readyz", "/events", "/ui", "/ui/state", "/mcp", "/sse", "/message"} {
		for _, host := range []string{"evil.example", "evil.example" + port, "127.0.0.1.evil.example" + port} {
			if code, body := get(path, host); code != http.StatusForbidden {
				t.Errorf("GET %s with Host %s = %d, want 403:\n%s", path, host, code, body)
			} else if !strings.Contains(body, "DNS rebinding") {
				t.Errorf("GET %s with Host %s: 403 body %q does not name the rule", path, host, body)
			}
		}
	}
	for _, path := range []string{"/metrics", "/readyz", "/ui/state"} {
		for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "[::1]" + port, "LOCALHOST"} {
			if code, body := get(path, host); code != http.StatusOK {
				t.Errorf("GET %s with Host %s = %d, want 200:\n%s", path, host, code, body)
			}
		}
	}
	if code, body := get("/healthz", "evil.example"); code != http.StatusOK {
		t.Errorf("GET /healthz with Host evil.example = %d, want 200 (it shows nothing):\n%s", code, body)
	}
}

// TestSSENoWildcardOrigin checks that the legacy SSE stream does not let
// every origin read it (mcp-go sends Access-Control-Allow-Origin: *).
func TestSSENoWildcardOrigin(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/sse", nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse = %d, want 200", resp.StatusCode)
	}
	if v := resp.Header.Values("Access-Control-Allow-Origin"); len(v) != 0 {
		t.Errorf("GET /sse from https://evil.example: Access-Control-Allow-Origin %q, want none", v)
	}
}
