package mcpfront

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// TestMCPGoSSEAllowsAnyOrigin pins doc.go fact 15: mcp-go's SSE handler
// lets every origin read the stream unless given its own CORS settings.
func TestMCPGoSSEAllowsAnyOrigin(t *testing.T) {
	s := server.NewSSEServer(server.NewMCPServer("pin", "1"), server.WithUseFullURLForMessageEndpoint(false))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	w := &firstWrite{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
	s.SSEHandler().ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/sse", nil))
	if got := w.Header().Get(headerACAO); got != "*" {
		t.Errorf("mcp-go's SSE stream sets Access-Control-Allow-Origin %q, not *; sseStream's override may go", got)
	}
}

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
