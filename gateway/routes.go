package gateway

import (
	"context"
	"maps"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/gateway/internal/mcpfront"
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
	plan retry.Plan
	// reentrant marks a tool whose executor runs calls of other tools
	// through the pipeline (toolgate_batch): it takes no slot itself and
	// finds its Call in its context.
	reentrant bool
}

// bind records the executors of tools and then runs add, which puts the
// tools in the registry; routes are built from the executors when the
// registry reports the change. If add fails, the executors recorded before
// are restored, so a refused tool never replaces a registered tool's
// executor. Callers hold regMu.
func (g *Gateway) bind(bs []executors.Bound, add func() error) error {
	g.execMu.Lock()
	old := make(map[string]executors.Executor, len(bs))
	for _, b := range bs {
		if _, seen := old[b.Tool.Name]; !seen {
			old[b.Tool.Name] = g.execs[b.Tool.Name]
		}
		g.execs[b.Tool.Name] = b.Exec
	}
	g.execMu.Unlock()
	err := add()
	if err != nil {
		g.execMu.Lock()
		for name, e := range old {
			if e == nil {
				delete(g.execs, name)
			} else {
				g.execs[name] = e
			}
		}
		g.execMu.Unlock()
	}
	return err
}

func (g *Gateway) dropExecs(names ...string) {
	g.execMu.Lock()
	defer g.execMu.Unlock()
	for _, n := range names {
		delete(g.execs, n)
	}
}

// addUpstreamTools replaces the tools of upstream with tools, as it lists
// them (again).
func (g *Gateway) addUpstreamTools(upstream string, tools []executors.Bound) error {
	defs := make([]registry.Tool, len(tools))
	for i, b := range tools {
		defs[i] = b.Tool
	}
	g.regMu.Lock()
	defer g.regMu.Unlock()
	return g.bind(tools, func() error { return g.reg.ReplaceSource("upstream:"+upstream, defs) })
}

// newRoute binds t, a registered tool, to its executor and retry plan.
func (g *Gateway) newRoute(t *registry.Tool) *route {
	g.execMu.Lock()
	exec := g.execs[t.Name]
	g.execMu.Unlock()
	if exec == nil {
		exec = missingExec{}
	}
	return &route{tool: t, exec: exec, plan: g.res.plan(t), reentrant: t.Name == BatchToolName && t.Source == batchSource}
}

// missingExec runs a tool whose executor is gone (it was removed while a
// call was on its way).
type missingExec struct{}

func (missingExec) Execute(_ context.Context, c executors.Call) (executors.Result, error) {
	return executors.Result{}, retry.Errorf(retry.NotFound, "tool %q was just removed; call tools/list", c.Tool.Name)
}

// lookup finds the route of the tool called name, repairing the name when
// guards.name_repair allows. An unknown name is counted and returned as
// an error wrapping registry.ErrNotFound, with suggestions.
func (g *Gateway) lookup(name string) (*route, error) {
	if r, ok := (*g.routes.Load())[name]; ok {
		return r, nil
	}
	t, err := g.reg.Resolve(name, g.cfg.Guards.NameRepair)
	if err != nil {
		g.metrics.unknownTools.Inc()
		return nil, err
	}
	if r, ok := (*g.routes.Load())[t.Name]; ok && r.tool == t {
		return r, nil
	}
	// Registered, and its change not yet delivered (syncTools).
	return g.newRoute(t), nil
}

// syncTools mirrors a registry change into the routes and the MCP front,
// which tells connected clients (notifications/tools/list_changed). The
// registry delivers changes one at a time, so routes has one writer.
func (g *Gateway) syncTools(c registry.Change) {
	routes := maps.Clone(*g.routes.Load())
	for _, name := range c.Removed {
		delete(routes, name) // a replaced tool is added back below
	}
	add := make([]mcpfront.Tool, 0, len(c.Added))
	for _, t := range c.Added {
		r := g.newRoute(t)
		routes[t.Name] = r
		add = append(add, mcpfront.Tool{Def: t, Call: g.serveFront(r)})
	}
	g.routes.Store(&routes)
	if len(c.Removed) > 0 {
		// The caches are keyed by the old *Tool.
		g.metrics.forget(c.Removed)
		g.res.forget(c.Removed)
	}
	// A replaced tool (an upstream listing its tools again) is in both
	// lists; the front replaces it in place.
	g.front.SetTools(add, c.Removed)
}

// serveFront returns the function the MCP front calls for r's tool.
func (g *Gateway) serveFront(r *route) func(context.Context, *mcpfront.Request) *executors.Result {
	return func(ctx context.Context, req *mcpfront.Request) *executors.Result {
		c := &Call{Name: r.tool.Name, route: r, input: req.Args, decoded: true, Raw: req.Raw, Meta: req.Meta, Session: req.Session, Progress: req.Progress}
		res, err := g.handle(ctx, c)
		if err != nil {
			res = errorResult(err)
		}
		return (*executors.Result)(res)
	}
}

// frontBackend is the gateway as the MCP front sees it.
type frontBackend struct{ g *Gateway }

var _ mcpfront.Backend = frontBackend{}

func (b frontBackend) Resolve(name []byte) (string, error) {
	if _, ok := (*b.g.routes.Load())[string(name)]; ok {
		return "", nil
	}
	r, err := b.g.lookup(string(name))
	if err != nil {
		return "", err
	}
	if r.tool.Name == string(name) {
		return "", nil
	}
	return r.tool.Name, nil
}

func (b frontBackend) SessionStarted(id string) {
	if _, loaded := b.g.sessions.LoadOrStore(id, sessionThread(id)); !loaded {
		b.g.metrics.sessions.Inc()
		b.g.logger.Debug("session started")
	}
}

func (b frontBackend) SessionEnded(id string) {
	if _, ok := b.g.sessions.LoadAndDelete(id); ok {
		b.g.metrics.sessions.Dec()
		b.g.pool.CloseThread(sessionThread(id))
		b.g.logger.Debug("session ended")
	}
}

// Drain drains within server.shutdown_grace.
func (b frontBackend) Drain(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.g.cfg.Server.ShutdownGrace.D())
	defer cancel()
	return b.g.drain(ctx)
}
