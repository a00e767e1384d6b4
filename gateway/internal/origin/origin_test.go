package origin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLoopbackHostElsewhere checks that the Host rule leaves alone a
// request that reached an address other than loopback.
func TestLoopbackHostElsewhere(t *testing.T) {
	h := LoopbackHost(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, tc := range []struct {
		local string
		want  int
	}{{"192.0.2.1:8080", http.StatusNoContent}, {"127.0.0.1:8080", http.StatusForbidden}, {"[::1]:8080", http.StatusForbidden}} {
		req, _ := http.NewRequestWithContext(context.WithValue(t.Context(), http.LocalAddrContextKey, addr(tc.local)), http.MethodGet, "/metrics", nil)
		req.Host = "toolgate.example"
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, req)
		if rec.code != tc.want {
			t.Errorf("Host toolgate.example reaching %s = %d, want %d", tc.local, rec.code, tc.want)
		}
	}
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.code = code }

// TestPolicy checks each decision of the browser Origin rule: the MCP
// endpoints (CORS) let a cross-origin GET through and refuse a foreign
// POST or preflight; data endpoints (ReadOnly) refuse a foreign GET too;
// an allowed origin gets through both, with its preflight answered and
// the Mcp-Param-* headers it asks for allowed.
func TestPolicy(t *testing.T) {
	p := New([]string{"https://app.example"})
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	cors, readOnly := p.CORS(next), p.ReadOnly(next)
	type req struct {
		method, origin, site string
		preflight            bool
	}
	for _, tc := range []struct {
		name      string
		h         http.Handler
		r         req
		want      int
		allowedAs string // Access-Control-Allow-Origin wanted
	}{
		{"mcp: foreign GET", cors, req{method: "GET", origin: "https://evil.example", site: "cross-site"}, http.StatusNoContent, ""},
		{"mcp: foreign POST", cors, req{method: "POST", origin: "https://evil.example", site: "cross-site"}, http.StatusForbidden, ""},
		{"mcp: foreign preflight", cors, req{method: "OPTIONS", origin: "https://evil.example", preflight: true}, http.StatusForbidden, ""},
		{"mcp: allowed POST", cors, req{method: "POST", origin: "https://app.example", site: "cross-site"}, http.StatusNoContent, "https://app.example"},
		{"mcp: allowed preflight", cors, req{method: "OPTIONS", origin: "https://app.example", preflight: true}, http.StatusNoContent, "https://app.example"},
		{"mcp: no browser", cors, req{method: "POST"}, http.StatusNoContent, ""},
		{"data: foreign GET", readOnly, req{method: "GET", origin: "https://evil.example", site: "cross-site"}, http.StatusForbidden, ""},
		{"data: allowed GET", readOnly, req{method: "GET", origin: "https://app.example", site: "cross-site"}, http.StatusNoContent, ""},
		{"data: same-origin GET", readOnly, req{method: "GET", site: "same-origin"}, http.StatusNoContent, ""},
	} {
		r, _ := http.NewRequestWithContext(t.Context(), tc.r.method, "http://toolgate.example/mcp", nil)
		if tc.r.origin != "" {
			r.Header.Set("Origin", tc.r.origin)
		}
		if tc.r.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.r.site)
		}
		if tc.r.preflight {
			r.Header.Set("Access-Control-Request-Method", "POST")
			r.Header.Set("Access-Control-Request-Headers", "content-type, mcp-param-region, x-other")
		}
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, r)
		if rec.Code != tc.want {
			t.Errorf("%s = %d, want %d: %s", tc.name, rec.Code, tc.want, rec.Body)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != tc.allowedAs {
			t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", tc.name, got, tc.allowedAs)
		}
		if rec.Code == http.StatusForbidden && !strings.Contains(rec.Body.String(), "server.allowed_origins") {
			t.Errorf("%s: refusal %q does not name server.allowed_origins", tc.name, rec.Body)
		}
		if tc.r.preflight && tc.want == http.StatusNoContent {
			allow := rec.Header().Get("Access-Control-Allow-Headers")
			if !strings.HasSuffix(allow, ", mcp-param-region") {
				t.Errorf("%s: Access-Control-Allow-Headers %q does not end with the asked Mcp-Param header alone", tc.name, allow)
			}
		}
	}
}
