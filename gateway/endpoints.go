package gateway

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/mcpfront"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/internal/rpcrefusal"
)

// Virtual servers (config endpoints, docs/endpoints.md): each endpoint is
// an MCP front of its own, at its own path, with its own instructions and
// sessions, serving the tools its globs match. A client of an endpoint
// reaches the gateway as its principal with the endpoint's globs added to
// its permissions (scopedIdentity), so everything that already honours a
// principal's permissions honours the endpoint too: tools/list, a call by
// name or by repair, toolgate_batch, the catalogs' search, the resources,
// prompts and log messages of an upstream. An endpoint with catalog:
// search lists the gateway-wide catalog's meta-tools in place of its
// tools (frontBackend.search, route.hidden), and serves them: their
// search, describe and call, filtered by that same identity, cover its
// tools only.

// endpoint is one configured virtual server.
type endpoint struct {
	cfg    config.Endpoint
	search bool // lists the gateway-wide search meta-tools in place of its tools (catalog: search)
	front  *mcpfront.Front
}

// serves reports whether e serves tool: one its globs match, or a
// gateway-wide meta-tool when e lists them, whose searches, describes
// and calls cover the rest of e's tools only (endpointPolicy).
func (e *endpoint) serves(tool string) bool {
	return matchAny(e.cfg.Tools, tool) || (e.search && isGatewayMeta(tool))
}

// admits reports whether principal name may use e.
func (e *endpoint) admits(name string) bool {
	return e.cfg.Principals == nil || matchAny(e.cfg.Principals, name)
}

// matchAny reports whether one of globs matches name.
func matchAny(globs []string, name string) bool {
	return slices.ContainsFunc(globs, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	})
}

// endpointPolicy is a principal's policy (nil: everything) narrowed to an
// endpoint's tools.
type endpointPolicy struct {
	e     *endpoint
	inner principal.Policy
}

func (p endpointPolicy) Permits(tool string) bool {
	return p.e.serves(tool) && (p.inner == nil || p.inner.Permits(tool))
}

func (p endpointPolicy) Take() time.Duration {
	if p.inner == nil {
		return 0
	}
	return p.inner.Take()
}

// scopedIdentity is id (nil: the anonymous principal of a gateway without
// authentication) as a client of e.
func (e *endpoint) scopedIdentity(id *principal.Identity) *principal.Identity {
	out := &principal.Identity{Endpoint: e.cfg.Name}
	if id != nil {
		out.Name, out.Admin, out.Token = id.Name, id.Admin, id.Token // Token: for per-principal token exchange
		out.Policy = endpointPolicy{e: e, inner: id.Policy}
		return out
	}
	out.Policy = endpointPolicy{e: e}
	return out
}

// authenticate returns the middleware of e's HTTP routes: the gateway's
// authentication (authn, nil without), then e's principals rule, then the
// identity scoped to e.
func (e *endpoint) authenticate(authn func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		scoped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := principal.From(r.Context())
			if !e.admits(principal.NameOf(id)) {
				rpcrefusal.Write(w, http.StatusForbidden, rpcrefusal.Unauthorized, fmt.Sprintf(
					"endpoint %q is not open to principal %q: ask the operator to add it to the endpoint's principals (config endpoints)", e.cfg.Name, principal.NameOf(id)))
				return
			}
			next.ServeHTTP(w, r.WithContext(principal.With(r.Context(), e.scopedIdentity(id))))
		})
		if authn == nil {
			return scoped
		}
		return authn(scoped)
	}
}

// newEndpoints builds the fronts of cfg's endpoints with base, the default
// front's options.
func (g *Gateway) newEndpoints(cfg *config.Config, base mcpfront.Options) []*endpoint {
	out := make([]*endpoint, 0, len(cfg.Endpoints))
	for _, ec := range cfg.Endpoints {
		e := &endpoint{cfg: ec, search: ec.Search(cfg.Catalog)}
		o := base
		o.MCPPath = config.EndpointPath(cfg.Server.MCPPath, ec.Name)
		o.SSEPath, o.MessagePath = "/sse/"+ec.Name, "/message/"+ec.Name
		if ec.Instructions != "" {
			o.Instructions = ec.Instructions
		}
		o.Authenticate = e.authenticate(base.Authenticate)
		o.Scope = e.scopedIdentity
		o.SessionsOf = g.front // server.max_sessions and auth.max_sessions count every endpoint's
		e.front = mcpfront.New(frontBackend{g: g, search: e.search}, o)
		out = append(out, e)
	}
	return out
}

// fronts are every MCP front: the default endpoint's, then the
// configured endpoints'.
func (g *Gateway) fronts() []*mcpfront.Front {
	out := make([]*mcpfront.Front, 0, 1+len(g.endpoints))
	out = append(out, g.front)
	for _, e := range g.endpoints {
		out = append(out, e.front)
	}
	return out
}

// endpointFront returns the front of endpoint name ("" for the default
// one), or nil when there is none by that name.
func (g *Gateway) endpointFront(name string) *mcpfront.Front {
	if name == "" {
		return g.front
	}
	for _, e := range g.endpoints {
		if e.cfg.Name == name {
			return e.front
		}
	}
	return nil
}

// setEndpointTools passes a change of the served tools to each endpoint:
// only the tools it serves, of those its listing lists (add, by
// listing).
func (g *Gateway) setEndpointTools(add [2][]mcpfront.Tool, removed []string) {
	for _, e := range g.endpoints {
		var a []mcpfront.Tool
		for _, t := range add[listing(e.search)] {
			if e.serves(t.Def.Name) {
				a = append(a, t)
			}
		}
		var r []string
		for _, n := range removed {
			if e.serves(n) {
				r = append(r, n)
			}
		}
		if len(a) > 0 || len(r) > 0 {
			e.front.SetTools(a, r)
		}
	}
}

// endpointNames lists the configured endpoints' names for a message.
func (g *Gateway) endpointNames() string {
	if len(g.endpoints) == 0 {
		return "none"
	}
	names := make([]string, len(g.endpoints))
	for i, e := range g.endpoints {
		names[i] = e.cfg.Name
	}
	return strings.Join(names, ", ")
}
