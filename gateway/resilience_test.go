package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/configtest"
)

// failing starts an API that answers every request with 503 and counts
// them.
func failing(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestRetrySectionBeatsDefaults checks, end to end from the file, that a
// REST tool's and an OpenAPI source's own retry section decides how many
// attempts their calls make, over defaults.retry; a tool without one gets
// the defaults. Each tool has its own API (so its own backend, breaker
// and budget).
func TestRetrySectionBeatsDefaults(t *testing.T) {
	defAPI, defHits := failing(t)
	ownAPI, ownHits := failing(t)
	oapiAPI, oapiHits := failing(t)
	doc := filepath.Join(t.TempDir(), "pets.yaml")
	if err := os.WriteFile(doc, []byte(strings.Replace(configtest.TinyOpenAPI, "http://127.0.0.1:9/", oapiAPI.URL+"/", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	in := configtest.Lines(
		"defaults:",
		"  retry: {attempts: 3, initial_backoff: 1ms, max_backoff: 2ms}",
		"rest:",
		"  - name: by_default",
		"    url: "+defAPI.URL+"/x",
		"  - name: own_retry",
		"    url: "+ownAPI.URL+"/x",
		"    retry: {attempts: 1}",
		"openapi:",
		"  - name: pets",
		"    spec: "+doc,
		"    retry: {attempts: 2, initial_backoff: 1ms, max_backoff: 2ms}",
	)
	cfg, err := config.Parse("t.yaml", in, nil)
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	cfg.Builtin = nil
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(func() { g.Close() })

	tests := []struct {
		tool string
		hits *atomic.Int64
		want int64
	}{
		{"by_default", defHits, 3},
		{"own_retry", ownHits, 1},
		{"pets__list", oapiHits, 2},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			res, err := g.Call(t.Context(), tc.tool, json.RawMessage(`{}`), nil)
			if err != nil {
				t.Fatalf("Call(%q) error = %v", tc.tool, err)
			}
			if !res.IsError || errorClass(res) != "unavailable" {
				t.Errorf("Call(%q) = %q (class %q), want an unavailable error", tc.tool, resultText(t, res), errorClass(res))
			}
			if got := tc.hits.Load(); got != tc.want {
				t.Errorf("Call(%q) made %d requests, want %d", tc.tool, got, tc.want)
			}
			if want := fmt.Sprintf("after %d attempt", tc.want); !strings.Contains(resultText(t, res), want) {
				t.Errorf("Call(%q) = %q, want it to say %q", tc.tool, resultText(t, res), want)
			}
		})
	}
}
