package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReadiness: the readiness endpoint needs no token, answers a probe
// naming any Host (a balancer's names the replica's address) and says one
// word, naming no tool, upstream or principal; Unready turns it to 503 at
// once, and /readyz with it, while calls are still served, each response
// asking its client to close the connection.
func TestReadiness(t *testing.T) {
	g := authGateway(t, nil)
	srv := serveHTTP(t, g)
	probe := func(method, host string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+ReadinessPath, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, ReadinessPath, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", method, ReadinessPath, cc)
		}
		return resp.StatusCode, string(b)
	}
	check := func(wantCode int, wantBody string) {
		t.Helper()
		for _, host := range []string{"", "10.0.0.7:8080", "evil.example"} {
			if code, body := probe(http.MethodGet, host); code != wantCode || body != wantBody {
				t.Errorf("GET %s (Host %q) = %d %q, want %d %q", ReadinessPath, host, code, body, wantCode, wantBody)
			}
		}
		if code, body := probe(http.MethodHead, ""); code != wantCode || body != "" {
			t.Errorf("HEAD %s = %d %q, want %d and no body", ReadinessPath, code, body, wantCode)
		}
	}
	check(http.StatusOK, "ready\n")
	if asksToClose(t, srv.URL+"/healthz") {
		t.Errorf("a response while ready asks to close the connection")
	}

	g.Unready()
	check(http.StatusServiceUnavailable, "draining\n")
	// A client holding a connection opens its next one elsewhere.
	if !asksToClose(t, srv.URL+"/healthz") {
		t.Errorf("a response once not ready does not ask to close the connection (Connection: close)")
	}
	code, _, body := get(t, srv.URL+"/readyz", opsToken, nil)
	var ready struct{ Status string }
	if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &ready) != nil || ready.Status != "shutting_down" {
		t.Errorf("/readyz after Unready = %d %s, want 503 shutting_down", code, body)
	}
	// Not ready, still serving: a balancer that has not noticed yet
	// loses nothing.
	if res, _ := g.Call(t.Context(), "echo", json.RawMessage(`{"text":"served"}`), nil); res.IsError || resultText(t, res) != "served" {
		t.Errorf("a call after Unready = %q (isError %v), want it served", resultText(t, res), res.IsError)
	}
}

// asksToClose reports whether the response to a GET of url asks the
// client to close the connection.
func asksToClose(t *testing.T, url string) bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Close
}

// TestReadinessWhileDraining: a gateway that drains (Shutdown, without
// Unready) is not ready either.
func TestReadinessWhileDraining(t *testing.T) {
	g, _ := newGateway(t, nil)
	srv := serveHTTP(t, g)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = g.Drain(ctx)
	if code, _, body := get(t, srv.URL+ReadinessPath, "", nil); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "draining") {
		t.Errorf("GET %s while draining = %d %q, want 503 draining", ReadinessPath, code, body)
	}
}
