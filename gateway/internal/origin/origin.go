// Package origin holds the gateway's rules on where an HTTP request may
// come from, each decided in one function: the Host rule against DNS
// rebinding ([LoopbackHost]) and the browser Origin rules ([Policy]):
// CORS for pages on server.allowed_origins, and refusal of every other
// cross-origin browser request.
package origin

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/rpcrefusal"
)

// LoopbackHost applies the DNS rebinding rule to h: a request that reached
// a loopback address must name a loopback Host (localhost, 127.0.0.1 or
// ::1, any port), or it gets 403. A page on a domain its owner has pointed
// at 127.0.0.1 is same-origin to the browser, so only the Host tells its
// requests apart from a local client's. Requests to any other address
// pass: rebinding reaches only loopback.
func LoopbackHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(a.String()) && !isLoopback(r.Host) {
			http.Error(w, fmt.Sprintf("Host %q refused: a request to a loopback address must name localhost, 127.0.0.1 or [::1] (DNS rebinding protection)", r.Host), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isLoopback reports whether a host, with or without a port, is localhost
// or a loopback IP address.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]") // no port
	}
	return config.IsLoopbackHost(host)
}

// The CORS answer to an allowed origin: what a page may send to the MCP
// endpoints, and which response headers its script may read.
const (
	allowMethods  = "GET, POST, DELETE"
	allowHeaders  = "Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Authorization, Last-Event-ID, Mcp-Method, Mcp-Name"
	exposeHeaders = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
	maxAge        = "600" // seconds a browser may reuse a preflight's answer
)

// Policy is the browser Origin rule of server.allowed_origins: pages on
// those origins may use the endpoints it guards; every other cross-origin
// browser request is refused with 403 naming the setting. Same-origin
// requests and clients that are not browsers (no Origin or Sec-Fetch-Site
// header) pass.
type Policy struct {
	allowed map[string]bool
	cop     *http.CrossOriginProtection
}

// New returns the Policy allowing origins (validated by config).
func New(origins []string) *Policy {
	p := &Policy{allowed: make(map[string]bool, len(origins)), cop: http.NewCrossOriginProtection()}
	for _, o := range origins {
		_ = p.cop.AddTrustedOrigin(o) // validated by config: cannot fail
		p.allowed[o] = true
	}
	return p
}

// CORS guards the MCP endpoints: it answers the preflights of allowed
// origins and marks responses to them readable; it refuses other origins'
// preflights, and their state-changing requests as net/http's
// CrossOriginProtection checks them (letting GET and HEAD through as free
// of side effects).
func (p *Policy) CORS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		hdr := w.Header()
		if len(p.allowed) > 0 {
			hdr.Add("Vary", "Origin") // the answer depends on it
		}
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			if !p.allowed[origin] {
				writeRefused(w, r)
				return
			}
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Allow-Methods", allowMethods)
			hdr.Set("Access-Control-Allow-Headers", allowHeaders+paramHeaders(r.Header.Get("Access-Control-Request-Headers")))
			hdr.Set("Access-Control-Expose-Headers", exposeHeaders)
			hdr.Set("Access-Control-Max-Age", maxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if p.allowed[origin] {
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Expose-Headers", exposeHeaders)
		}
		if p.cop.Check(r) != nil {
			writeRefused(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ReadOnly guards endpoints that show data (/events, /ui): a cross-origin
// browser request from an origin not allowed is refused whatever its
// method, GET included, as CORS refuses a POST.
func (p *Policy) ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probe := r.Clone(r.Context())
		probe.Method = http.MethodPost
		if err := p.cop.Check(probe); err != nil {
			writeRefused(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// paramHeaders returns, as ", A, B", the Mcp-Param-* headers a preflight
// asks for: a 2026-07-28 client sends a tool's x-mcp-header parameters in
// headers of that prefix, which no fixed list can name.
func paramHeaders(requested string) string {
	var out strings.Builder
	for h := range strings.SplitSeq(requested, ",") {
		h = strings.TrimSpace(h)
		if len(h) > len(mcp.HeaderParamPrefix) && strings.EqualFold(h[:len(mcp.HeaderParamPrefix)], mcp.HeaderParamPrefix) {
			out.WriteString(", ")
			out.WriteString(h)
		}
	}
	return out.String()
}

// writeRefused answers a cross-origin browser request, or preflight, from
// an origin not in server.allowed_origins: 403 with a JSON-RPC error (the
// MCP endpoints' clients read one) naming the setting.
func writeRefused(w http.ResponseWriter, r *http.Request) {
	msg := "cross-origin browser request refused: list its origin in server.allowed_origins"
	if o := r.Header.Get("Origin"); o != "" {
		msg = fmt.Sprintf("cross-origin browser request from %q refused: list the origin in server.allowed_origins", o)
	}
	rpcrefusal.Write(w, http.StatusForbidden, rpcrefusal.InvalidRequest, msg)
}
