package mcpfront

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// principalFront is a front whose authentication takes the principal's
// name from the X-Test-Principal header, with at most 2 sessions each.
func principalFront(t *testing.T) (*Front, string) {
	t.Helper()
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := &principal.Identity{Name: r.Header.Get("X-Test-Principal")}
			next.ServeHTTP(w, r.WithContext(principal.With(r.Context(), id)))
		})
	}
	f := New(&fakeBackend{reg: registry.New()}, Options{Name: "toolgate", Version: "test", MCPPath: "/mcp",
		MaxSessions: 1000, SessionIdleTTL: time.Minute, MaxBodyBytes: 1 << 20, ReadTimeout: 10 * time.Second,
		Authenticate: auth, MaxSessionsPerPrincipal: 2})
	t.Cleanup(f.Close)
	mux := http.NewServeMux()
	f.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/mcp"
}

// sessionAs opens a session as who and returns its ID, or "" with the
// refusal's status.
func sessionAs(t *testing.T, url, who string) (string, int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Test-Principal", who)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("Mcp-Session-Id"), resp.StatusCode
}

func endAs(t *testing.T, url, who, id string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("X-Test-Principal", who)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE of %s's session: HTTP %d", who, resp.StatusCode)
	}
}

// The per-principal session counts keep only principals with sessions: a
// principal whose sessions all ended is forgotten (before, every principal
// ever seen kept an entry), and the cap still holds throughout.
func TestPrincipalCountsForgotten(t *testing.T) {
	f, url := principalFront(t)
	for i := range 20 {
		who := fmt.Sprintf("p%d", i)
		a, _ := sessionAs(t, url, who)
		b, _ := sessionAs(t, url, who)
		if id, code := sessionAs(t, url, who); id != "" || code != http.StatusServiceUnavailable {
			t.Fatalf("%s's third session: HTTP %d, want 503 (auth.max_sessions 2)", who, code)
		}
		endAs(t, url, who, a)
		c, code := sessionAs(t, url, who)
		if c == "" {
			t.Fatalf("%s's session after ending one: HTTP %d", who, code)
		}
		endAs(t, url, who, b)
		endAs(t, url, who, c)
	}
	if n := f.limits.Principals(); n != 0 {
		t.Fatalf("%d principals counted after every session ended, want 0", n)
	}
	if live := f.limits.Live(); live != 0 {
		t.Fatalf("%d sessions counted after every session ended, want 0", live)
	}
}
