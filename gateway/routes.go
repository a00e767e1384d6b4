package gateway

import (
	"context"
	"maps"
	"sync/atomic"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/mcpup"
	"github.com/toolgate/toolgate/gateway/internal/mcpfront"
	"github.com/toolgate/toolgate/gateway/internal/threadname"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// route is a registered tool as the pipeline runs it: its definition, the
// executor bound to it at registration and its retry plan, found once per
// call by name (or not at all: the MCP front hands each tool's calls to a
// handler holding its route).
type route struct {
	tool *registry.Tool
	exec executors.Executor
	// plan is the retry plan its calls start with, shared with the other
	// tools of its source (resilience.Planner.Plan): replaced when a
	// reload changes the defaults (Gateway.replan).
	plan atomic.Pointer[retry.Plan]
	// reentrant marks a tool whose executor runs calls of other tools
	// through the pipeline (toolgate_batch): it takes no slot itself and
	// finds its Call in its context.
	reentrant bool
	// hidden marks a tool a front does not list (catalogtool.go): served
	// through a catalog, or a gateway-wide meta-tool at a front that lists
	// each tool. It runs like any other, but is not in that front's
	// tools/list nor callable by name from its clients. Indexed by
	// listing (catalogtool.go): at a front that lists each tool, or at one
	// in search mode.
	hidden [2]bool
	// gone is set when the registry removes or replaces the tool; a call
	// that reaches a gone route looks its tool up again.
	gone atomic.Bool
}

// reentrantExecutor is implemented by the executors of tools that run
// calls of other tools through the pipeline (toolgate_batch's).
type reentrantExecutor interface {
	executors.Executor
	reentrant()
}

// execKey names an executor: by the tool's source as well as its name, so
// that a source whose tool the registry refuses (a name another source
// holds) can never touch the other source's executor.
type execKey struct{ source, name string }

// bind records the executors of tools and then runs add, which puts the
// tools in the registry; routes are built from the executors when the
// registry reports the change. If add fails, the executors recorded before
// are restored. Each Bound's Tool.Source must be the source the registry
// will record. Callers hold regMu.
func (g *Gateway) bind(bs []executors.Bound, add func() error) error {
	g.execMu.Lock()
	old := make(map[execKey]executors.Executor, len(bs))
	for _, b := range bs {
		k := execKey{b.Tool.Source, b.Tool.Name}
		if _, seen := old[k]; !seen {
			old[k] = g.execs[k]
		}
		g.execs[k] = b.Exec
	}
	g.execMu.Unlock()
	err := add()
	if err != nil {
		g.execMu.Lock()
		for k, e := range old {
			if e == nil {
				delete(g.execs, k)
			} else {
				g.execs[k] = e
			}
		}
		g.execMu.Unlock()
	}
	return err
}

// dropExecs forgets the executors of source's tools names.
func (g *Gateway) dropExecs(source string, names ...string) {
	g.execMu.Lock()
	defer g.execMu.Unlock()
	for _, n := range names {
		delete(g.execs, execKey{source, n})
	}
}

// setSourceTools replaces the tools of source with tools (none: removes
// them), all or none, and forgets the executors of the tools it drops.
// Connected clients are told through notifications/tools/list_changed.
func (g *Gateway) setSourceTools(source string, tools []executors.Bound) error {
	defs := make([]registry.Tool, len(tools))
	listed := make(map[string]bool, len(tools))
	for i := range tools {
		tools[i].Tool.Source = source
		defs[i] = tools[i].Tool
		listed[defs[i].Name] = true
	}
	g.regMu.Lock()
	defer g.regMu.Unlock()
	var dropped []string
	for _, t := range g.reg.List() {
		if t.Source == source && !listed[t.Name] {
			dropped = append(dropped, t.Name)
		}
	}
	if err := g.bind(tools, func() error { return g.reg.ReplaceSource(source, defs) }); err != nil {
		return err
	}
	g.dropExecs(source, dropped...)
	return nil
}

// newRoute binds t, a registered tool, to its executor and retry plan.
func (g *Gateway) newRoute(t *registry.Tool) *route {
	g.execMu.Lock()
	exec := g.execs[execKey{t.Source, t.Name}]
	g.execMu.Unlock()
	if exec == nil {
		exec = missingExec{}
	}
	_, reentrant := exec.(reentrantExecutor)
	r := &route{tool: t, exec: exec, reentrant: reentrant,
		hidden: [2]bool{!g.catalogs.Listed(t, false), !g.catalogs.Listed(t, true)}}
	r.plan.Store(g.res.Plan(t))
	return r
}

// replan gives every route the retry plan of the resilience settings in
// force, after a reload changed the defaults: calls that start from now
// on retry by it, calls in flight keep theirs.
func (g *Gateway) replan() {
	g.routesMu.Lock()
	defer g.routesMu.Unlock()
	for _, r := range *g.routes.Load() {
		r.plan.Store(g.res.Plan(r.tool))
	}
}

// missingExec runs a tool whose executor is gone (it was removed while a
// call was on its way).
type missingExec struct{}

func (missingExec) Execute(_ context.Context, c executors.Call) (executors.Result, error) {
	return executors.Result{}, retry.Errorf(retry.NotFound, "tool %q was just removed; call tools/list", c.Tool.Name)
}

// lookup finds the route of the tool called name, repairing the name when
// guards.name_repair allows. An unknown name is counted and returned as
// an error wrapping registry.ErrNotFound, with suggestions. A repair is
// counted by kind; each call is looked up once (the front's Resolve, or
// handle for calls the front did not resolve), so counts once.
func (g *Gateway) lookup(name string) (*route, error) {
	if r, ok := (*g.routes.Load())[name]; ok {
		return r, nil
	}
	t, kind, err := g.reg.ResolveRepair(name, g.settings().guards.NameRepair)
	if err != nil {
		g.metrics.UnknownTool()
		return nil, err
	}
	if kind != registry.RepairNone {
		g.metrics.NameRepair(kind)
	}
	if r, ok := (*g.routes.Load())[t.Name]; ok && r.tool == t {
		return r, nil
	}
	// Registered, and its change not yet delivered (syncTools).
	return g.newRoute(t), nil
}

// syncTools mirrors a registry change into the routes and the MCP front,
// which tells connected clients (notifications/tools/list_changed). The
// registry delivers changes one at a time; routesMu keeps replan out
// while the routes are rebuilt.
func (g *Gateway) syncTools(c registry.Change) {
	if len(c.Removed) > 0 {
		// The caches are keyed by the old *Tool; forgotten before the new
		// routes cache their own.
		g.metrics.Forget(c.Removed)
		g.caches.Forget(c.Removed)
	}
	g.catalogs.Changed(c)
	g.routesMu.Lock()
	routes := maps.Clone(*g.routes.Load())
	for _, name := range c.Removed {
		if r, ok := routes[name]; ok {
			r.gone.Store(true)
		}
		delete(routes, name) // a replaced tool is added back below
	}
	var add [2][]mcpfront.Tool // by listing: what fronts that list each tool list, and search fronts
	for _, t := range c.Added {
		r := g.newRoute(t)
		routes[t.Name] = r
		for l, hidden := range r.hidden {
			if !hidden {
				add[l] = append(add[l], mcpfront.Tool{Def: t, Call: g.serveFront(r)})
			}
		}
	}
	g.routes.Store(&routes)
	g.routesMu.Unlock()
	// A replaced tool (an upstream listing its tools again) is in both
	// lists; the front replaces it in place.
	g.front.SetTools(add[listing(g.searchFront)], c.Removed)
	g.setEndpointTools(add, c.Removed)
}

// serveFront returns the function the MCP front calls for r's tool.
func (g *Gateway) serveFront(r *route) func(context.Context, *mcpfront.Request) *executors.Result {
	return func(ctx context.Context, req *mcpfront.Request) *executors.Result {
		r := r
		if req.Peer != nil {
			// The upstream side relays an upstream's requests and log
			// messages during the call to req's client.
			ctx = mcpup.WithPeer(ctx, req.Peer)
		}
		if name := r.tool.Name; r.gone.Load() {
			// Removed or replaced while the call was on its way: run what
			// the name means now, or nothing.
			var err error
			if r, err = g.lookup(name); err != nil {
				return (*executors.Result)(errorResult(retry.Errorf(retry.NotFound, "tool %q was just removed; call tools/list", name)))
			}
		}
		c := &Call{Name: r.tool.Name, route: r, Tool: r.tool, decoded: len(req.Raw) == 0, Raw: req.Raw, Meta: req.Meta, Session: req.Session, Progress: req.Progress, elicit: req.Elicit,
			ident: req.Identity, Principal: principal.NameOf(req.Identity), sessionless: req.Session == ""}
		res, err := (*g.chain.Load())(ctx, c) // resolved: no handle
		if err != nil {
			res = errorResult(err)
		}
		return (*executors.Result)(res)
	}
}

// frontBackend is the gateway as an MCP front sees it; search says
// whether the front lists the gateway-wide catalog's meta-tools in place
// of the tools (catalog.mode, endpoints[].catalog).
type frontBackend struct {
	g      *Gateway
	search bool
}

var _ mcpfront.Backend = frontBackend{}

func (b frontBackend) Resolve(name []byte) (string, error) {
	l := listing(b.search)
	if r, ok := (*b.g.routes.Load())[string(name)]; ok && !r.hidden[l] {
		return "", nil
	}
	r, err := b.g.lookup(string(name))
	if err != nil {
		return "", b.g.catalogs.VisibleNotFound(err, b.search)
	}
	if r.hidden[l] {
		b.g.metrics.UnknownTool()
		if c := b.g.catalogs.HiddenBy(r.tool, b.search); c != nil {
			// Served through its catalog's meta-tools only (catalogtool.go).
			return "", c.HiddenError(string(name), r.tool)
		}
		// A gateway-wide meta-tool at a front that lists each tool.
		return "", &registry.NotFoundError{Name: string(name), Available: -1}
	}
	if r.tool.Name == string(name) {
		return "", nil
	}
	return r.tool.Name, nil
}

func (b frontBackend) SessionStarted(id string) {
	if b.g.sessions.Start(id) {
		b.g.metrics.SessionOpened()
		b.g.logger.Debug("session started")
	}
}

func (b frontBackend) SessionEnded(id string) {
	if b.g.sessions.End(id) {
		b.g.metrics.SessionClosed()
		b.g.pool.CloseThread(threadname.Session(id))
		b.g.loops.Forget(threadname.Session(id))
		b.g.logger.Debug("session ended")
	}
}

// Drain drains within server.shutdown_grace.
func (b frontBackend) Drain(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.g.cfg.Server.ShutdownGrace.D())
	defer cancel()
	return b.g.drain(ctx)
}
