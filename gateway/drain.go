package gateway

import (
	"io"
	"net/http"
)

// ReadinessPath is the readiness endpoint for load balancers and
// orchestrators: unauthenticated, it answers 200 "ready" or, once the
// gateway is leaving ([Gateway.Unready]) or draining, 503 "draining", and
// names nothing else (docs/scaling.md, "Draining").
const ReadinessPath = "/healthz/ready"

// Unready makes the gateway report not ready from now on, while it serves
// everything as before: its readiness endpoint ([ReadinessPath]) answers
// 503, and /readyz says shutting_down. Every response from then on asks
// the client to close its connection (Connection: close), so that a
// client holding one (through a balancer that forwards connections, like
// a Kubernetes Service) opens its next one where the balancer sends it,
// not here. A replica behind a load balancer calls it at once on
// SIGTERM, so that the balancer's health check takes it out of rotation
// before its listener closes. It cannot be undone.
func (g *Gateway) Unready() { g.unready.Store(true) }

// closeWhenUnready is the middleware that asks each client to close its
// connection after the response once the gateway is not ready (Unready).
func (g *Gateway) closeWhenUnready(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.unready.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// ready reports whether the gateway takes new work: not once it is
// leaving or draining.
func (g *Gateway) ready() bool { return !g.unready.Load() && !g.calls.IsDraining() }

// EndStreams ends the long-lived MCP streams gracefully, now and as they
// open from now on: each streamable HTTP session's GET stream ends (the
// session stays, and its calls go on), and each 2026-07-28
// subscriptions/listen request is answered. Their clients reconnect: a
// replica leaving its cluster calls it once its listener has closed, so
// that they reconnect to another replica. Legacy SSE streams, which carry
// their session's answers, end with [Gateway.Close].
func (g *Gateway) EndStreams() {
	for _, f := range g.fronts() {
		f.EndStreams()
	}
}

// serveReadiness answers ReadinessPath: a status and one word, nothing
// that names a tool, an upstream or a principal.
func (g *Gateway) serveReadiness(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if !g.ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "draining\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}
