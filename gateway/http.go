package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgate/toolgate/gateway/internal/gzipjson"
	"github.com/toolgate/toolgate/gateway/internal/origin"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/upstreamoauth"
)

// Handler returns the gateway's HTTP handler: MCP over streamable HTTP at
// server.mcp_path, legacy SSE at /sse and /message (when server.sse is on),
// /metrics, /healthz, /readyz, the readiness endpoint [ReadinessPath], the
// call lifecycle events at /events and the live calls page at /ui. Request
// bodies are capped at server.max_body_bytes and cross-origin browser
// requests are refused unless their origin is in server.allowed_origins.
// Every endpoint but /healthz and [ReadinessPath], which show nothing,
// refuses a request that reached a loopback address naming a Host that is
// not loopback (DNS rebinding protection; see origin.LoopbackHost). With
// authentication configured, every endpoint but those two and the
// protected resource metadata (RFC 9728, at
// /.well-known/oauth-protected-resource and that path followed by the MCP
// path) and [upstreamoauth.CallbackPath] (a browser back from authorizing a
// per-principal upstream: its state is its credential) needs a bearer token, and so does everything but the page and
// script of /ui, which hold no data; CORS preflights are answered without
// one. An authenticated principal sees only its own calls at /events and
// /ui/state.
// The same handler is returned on every call.
func (g *Gateway) Handler() http.Handler {
	g.httpOnce.Do(func() {
		g.redis.Join(g.root) // served over HTTP: a member of its cluster (redis.go)
		r := chi.NewRouter()
		r.Use(g.closeWhenUnready)
		r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok\n")
		})
		// Readiness for balancers and probes names nothing either (drain.go).
		r.Get(ReadinessPath, g.serveReadiness)
		r.Head(ReadinessPath, g.serveReadiness)
		r.Get(auth.MetadataPath, g.auth.ServeMetadata)
		r.Get(auth.MetadataPath+g.cfg.Server.MCPPath, g.auth.ServeMetadata)
		authed := func(h http.Handler) http.Handler { return h }
		if g.auth != nil {
			authed = g.authenticate
		}
		// Everything else shows tool, upstream or backend names, or call
		// data: the DNS rebinding rule, before anything else answers (mcp-go
		// applies it too, but after toolgate's session checks).
		r.Group(func(r chi.Router) {
			r.Use(origin.LoopbackHost)
			// They name every tool, upstream and backend: with auth, for
			// auth.admins only.
			r.Handle("/readyz", authed(g.adminOnly(http.HandlerFunc(g.serveReady))))
			// A browser coming back from an upstream's authorization
			// server: the state it brings is its credential.
			r.Get(upstreamoauth.CallbackPath, upstreamoauth.Callback(g.ups.All, g.logger))
			r.Handle("/metrics", authed(g.adminOnly(promhttp.HandlerFor(g.metrics.Registry(), promhttp.HandlerOpts{Registry: g.metrics.Registry()}))))
			// Call data: the MCP endpoint's origin rules, GETs included,
			// and its auth.
			browsers := origin.New(g.cfg.Server.AllowedOrigins)
			ev := g.eventServer()
			r.Handle("/events", browsers.ReadOnly(authed(http.HandlerFunc(ev.ServeEvents))))
			r.Handle("/ui/state", browsers.ReadOnly(authed(http.HandlerFunc(ev.ServeUIState))))
			// The page and its script hold no data, and a browser cannot
			// send a bearer token when it navigates: they need none. The
			// page asks for a token and sends it to /ui/state and /events.
			page := browsers.ReadOnly(http.HandlerFunc(ev.ServeUI))
			r.Handle("/ui", page)
			r.Handle("/ui/*", page)
			for _, f := range g.fronts() {
				f.Mount(gzipjson.Mux(r)) // large JSON answers gzip-compressed
			}
		})
		g.router = r
	})
	return g.router
}

func (g *Gateway) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	status, code := "ready", http.StatusOK
	if !g.ready() {
		status, code = "shutting_down", http.StatusServiceUnavailable
	}
	body := map[string]any{"status": status, "tools": g.reg.Len()}
	if ups := g.upstreamStatus(); ups != nil {
		body["upstreams"] = ups
		for _, up := range ups {
			if !up && code == http.StatusOK {
				// Still serving every other tool: ready, but degraded.
				body["status"] = "degraded"
			}
		}
	}
	if waiting := g.upstreamNeedsAuth(); len(waiting) > 0 {
		body["needs_auth"] = waiting // upstream → the command to run
		if code == http.StatusOK {
			body["status"] = "degraded"
		}
	}
	if down := g.openapi.Unavailable(); len(down) > 0 {
		body["openapi_unavailable"] = down // started without them
		if code == http.StatusOK {
			body["status"] = "degraded"
		}
	}
	if cs := g.res.Circuits(); cs != nil {
		body["circuits"] = cs
	}
	if st := g.lastReload.Load(); st != nil {
		body["reload"] = st
		if st.Result != "ok" && code == http.StatusOK {
			// The configuration before the failed reload serves on.
			body["status"] = "degraded"
		}
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// ServeStdio serves MCP over newline-delimited JSON-RPC on in and out, as
// Claude Desktop expects when it launches `toolgate stdio`. Nothing but
// protocol messages is written to out. The whole process is one session and
// one thread. ServeStdio returns when in reaches EOF (calls in flight are
// then cancelled, as the client has gone) or, after a graceful drain of up
// to server.shutdown_grace, when ctx is done. Only one ServeStdio may run
// per process (an mcp-go limit). The caller still calls Close.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return g.front.ServeStdio(ctx, in, out)
}

// ServeStdioEndpoint is [Gateway.ServeStdio] for the configured endpoint
// name (config endpoints): its tools and instructions only.
func (g *Gateway) ServeStdioEndpoint(ctx context.Context, name string, in io.Reader, out io.Writer) error {
	f := g.endpointFront(name)
	if f == nil {
		return fmt.Errorf("no endpoint %q in %s; the endpoints section names %s", name, g.cfg.Source, g.endpointNames())
	}
	return f.ServeStdio(ctx, in, out)
}
