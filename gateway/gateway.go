// Package gateway is toolgate's composition root and MCP front end. It
// builds the registry, executors and thread pool from a [config.Config],
// serves them as one MCP endpoint (streamable HTTP and legacy SSE through
// [Gateway.Handler], stdio through [Gateway.ServeStdio]), owns the call
// pipeline, the session → thread mapping and the Prometheus registry, and is
// the public API for programs that embed toolgate.
//
// gateway runs no HTTP calls to tools, spawns no processes and validates no
// schemas itself: executors and schemas do that. mcp-go's server types appear
// only here.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/mcpup"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/threadctx"
)

// Version is reported to clients in the initialize result unless
// [WithVersion] sets another.
const Version = "0.1.0-dev"

type options struct {
	logger  *slog.Logger
	version string
}

// Option configures [New].
type Option func(*options)

// WithLogger sets the logger. The default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithVersion sets the version reported to clients.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// Gateway is one toolgate instance: a registry of tools, the executors that
// run them and the MCP server that exposes them. Build it with [New], add
// tools with [Gateway.RegisterStateless] and [Gateway.RegisterStateful]
// (before or while serving), serve it, and call [Gateway.Shutdown] or
// [Gateway.Close] when done. Its methods are safe for concurrent use.
type Gateway struct {
	cfg     *config.Config
	logger  *slog.Logger
	version string

	reg         *registry.Registry
	dispatcher  *executors.Dispatcher
	stateless   *executors.Stateless
	stateful    *executors.Stateful
	rest        *rest.Executor
	up          *mcpup.Manager // nil without upstreams
	upOnce      sync.Once
	pool        *threadctx.Pool
	metrics     *metrics
	limiter     *limiter
	res         *resilience
	batchTool   *registry.Tool // toolgate_batch, or nil when off
	mcp         *server.MCPServer
	unsubscribe func()
	regMu       sync.Mutex // serialises Register* and Unregister

	// root is cancelled by Close; it bounds background work such as
	// fetching OpenAPI documents.
	root       context.Context
	rootCancel context.CancelCauseFunc
	calls      tracker
	oneShot    atomic.Uint64 // numbers one-call threads
	sessions   sync.Map      // live MCP session ID → its thread ID (string → string)
	clients    sync.Map      // live MCP session ID → *clientSession, its mcp-go session (batch.go)

	httpOnce  sync.Once
	router    http.Handler // built by Handler
	mu        sync.Mutex   // guards httpParts
	httpParts *httpParts   // built by Handler; closed by Close
	closeOnce sync.Once
}

// New builds a gateway from cfg. cfg must have been loaded by package config
// (defaults filled, validated). New starts no listener; the returned
// gateway owns a thread-pool janitor goroutine, stopped by Close.
func New(cfg *config.Config, opts ...Option) (*Gateway, error) {
	if cfg == nil {
		return nil, errors.New("gateway: nil config")
	}
	o := options{version: Version}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, logger: o.logger, version: o.version, reg: registry.New()}
	g.root, g.rootCancel = context.WithCancelCause(context.Background())
	g.pool = threadctx.NewPool(&threadctx.Options{
		IdleTTL:      cfg.Threads.IdleTTL.D(),
		MaxInstances: cfg.Threads.MaxInstances,
		Logger:       g.logger,
	})
	g.stateless = executors.NewStateless()
	g.stateful = executors.NewStateful(g.pool)
	g.limiter = newLimiter(cfg.Defaults.MaxParallel, cfg.Defaults.MaxParallelPerSession, cfg.Defaults.MaxQueue)
	g.metrics = newMetrics(g.pool, g.reg, g.limiter)
	g.res = newResilience(cfg, g.metrics)
	g.dispatcher = executors.NewDispatcher(&executors.DispatcherOptions{
		DefaultTimeout: cfg.Defaults.Timeout.D(),
		Logger:         g.logger,
		Plan:           g.res.plan,
		OnRetry:        g.metrics.retry,
	})
	g.rest = rest.New(&rest.Options{
		Logger:     g.logger,
		OnResponse: g.metrics.httpResponse,
		OnRetry:    g.metrics.retry,
	})
	g.dispatcher.Handle(registry.Stateless, g.stateless)
	g.dispatcher.Handle(registry.Stateful, g.stateful)
	g.dispatcher.Handle(registry.REST, g.rest)

	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		g.clientStarted(ctx, s)
		g.sessionStarted(s.SessionID())
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) {
		g.sessionEnded(s.SessionID())
		g.clientEnded(s)
	})
	g.mcp = server.NewMCPServer("toolgate", g.version,
		server.WithToolCapabilities(true),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithInstructions("toolgate gateway: every tool behind one endpoint. Tool failures come back as isError results whose text starts with an error class (validation, not_found, timeout, ...); fix validation errors and retry transient ones."),
	)
	g.unsubscribe = g.reg.Subscribe(g.syncTools)
	if err := g.addRESTTools(cfg); err != nil {
		g.Close()
		return nil, err
	}
	if err := g.buildUpstreams(cfg); err != nil {
		g.Close()
		return nil, err
	}
	if cfg.BatchTool {
		if err := g.addBatchTool(); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// RegisterStateless adds a stateless tool implemented by fn. t.Kind is set
// to stateless; an empty t.Source becomes "embedder". Errors name what is
// wrong with t (name, schema, a duplicate and both sources).
func (g *Gateway) RegisterStateless(t registry.Tool, fn executors.StatelessFunc) error {
	if fn == nil {
		return fmt.Errorf("registering %q: nil function", t.Name)
	}
	t.Kind = registry.Stateless
	if t.Source == "" {
		t.Source = "embedder"
	}
	return g.register(t, func() { g.stateless.Set(t.Name, fn) }, func() { g.stateless.Delete(t.Name) })
}

// RegisterStateful adds a stateful tool whose per-thread instances f
// creates. t.Kind is set to stateful; an empty t.Source becomes "embedder".
func (g *Gateway) RegisterStateful(t registry.Tool, f executors.Factory) error {
	if f.New == nil {
		return fmt.Errorf("registering %q: factory has no New function", t.Name)
	}
	t.Kind = registry.Stateful
	if t.Source == "" {
		t.Source = "embedder"
	}
	return g.register(t, func() { g.stateful.Set(t.Name, f) }, func() { g.stateful.Delete(t.Name) })
}

// register adds t to the registry with its implementation installed first
// (set), so no client can see the tool before it can run. A rejected tool
// leaves an existing tool of that name untouched.
func (g *Gateway) register(t registry.Tool, set, unset func()) error {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	if _, taken := g.reg.Get(t.Name); taken {
		return g.reg.Add(t) // fails, with the error naming both sources
	}
	set()
	if err := g.reg.Add(t); err != nil {
		unset()
		return err
	}
	return nil
}

// Unregister removes tools by name and returns the names removed. Connected
// clients are told through notifications/tools/list_changed.
func (g *Gateway) Unregister(names ...string) []string {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	removed := g.reg.Remove(names...)
	for _, n := range removed {
		g.stateless.Delete(n)
		g.stateful.Delete(n)
		g.rest.Remove(n)
	}
	return removed
}

// Tools returns the registered tools sorted by name.
func (g *Gateway) Tools() []*registry.Tool { return g.reg.List() }

// syncTools mirrors a registry change into the mcp-go server, which sends
// notifications/tools/list_changed to every connected client.
func (g *Gateway) syncTools(c registry.Change) {
	if len(c.Removed) > 0 {
		// A replaced tool (an upstream listing its tools again) is in both
		// lists; AddTools replaces it in mcp-go in place. Deleting it
		// first would leave a moment in which mcp-go answers its calls
		// with "tool not found". The caches are keyed by the old *Tool.
		if gone := removedOnly(c); len(gone) > 0 {
			g.mcp.DeleteTools(gone...)
		}
		g.metrics.forget(c.Removed)
		g.res.forget(c.Removed)
	}
	if len(c.Added) == 0 {
		return
	}
	st := make([]server.ServerTool, 0, len(c.Added))
	for _, t := range c.Added {
		st = append(st, server.ServerTool{Tool: wireTool(t), Handler: g.handleToolCall})
	}
	g.mcp.AddTools(st...)
}

// removedOnly returns the names c removes and does not add again.
func removedOnly(c registry.Change) []string {
	if len(c.Added) == 0 {
		return c.Removed
	}
	added := make(map[string]bool, len(c.Added))
	for _, t := range c.Added {
		added[t.Name] = true
	}
	var gone []string
	for _, name := range c.Removed {
		if !added[name] {
			gone = append(gone, name)
		}
	}
	return gone
}

func (g *Gateway) sessionStarted(id string) {
	if id == "" {
		return
	}
	if _, loaded := g.sessions.LoadOrStore(id, sessionThread(id)); !loaded {
		g.metrics.sessions.Inc()
		g.logger.Debug("session started")
	}
}

func (g *Gateway) sessionEnded(id string) {
	if id == "" {
		return
	}
	if _, ok := g.sessions.LoadAndDelete(id); ok {
		g.metrics.sessions.Dec()
		g.pool.CloseThread(sessionThread(id))
		g.logger.Debug("session ended")
	}
}

// Shutdown stops the gateway gracefully: new calls are refused with class
// unavailable, calls in flight may finish until ctx is done, after which
// they are cancelled (their clients get a cancelled result); then sessions
// are closed and every thread instance is closed. It returns ctx's error if
// the grace period ran out.
func (g *Gateway) Shutdown(ctx context.Context) error {
	err := g.calls.drain(ctx)
	if err != nil {
		g.logger.Warn("shutdown grace ran out; cancelling calls in flight", "in_flight", g.calls.count())
		g.calls.cancelAll(errShutdown)
		// Give cancelled calls a moment to deliver their results.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownCancelWait)
		_ = g.calls.drain(wctx)
		cancel()
	}
	g.Close()
	return err
}

// Close stops the gateway at once: calls in flight are cancelled, sessions
// and thread instances are closed, background goroutines stop. It is safe
// to call more than once.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		g.calls.startDraining()
		g.calls.cancelAll(errShutdown)
		g.rootCancel(errShutdown)
		g.mu.Lock()
		p := g.httpParts
		g.mu.Unlock()
		if p != nil {
			p.close()
		}
		g.unsubscribe()
		if g.up != nil {
			_ = g.up.Close() // kills and reaps every upstream process
		}
		g.pool.Close()
		g.rest.Close()
	})
	return nil
}

// libLogger is the logger handed to mcp-go.
func (g *Gateway) libLogger() *slog.Logger {
	return slog.New(quietHandler{g.logger.Handler(), slog.LevelWarn})
}

// mcpMeta returns the _meta additional fields of a request, or nil.
func mcpMeta(m *mcp.Meta) map[string]any {
	if m == nil {
		return nil
	}
	return m.AdditionalFields
}

// quietHandler passes on only records at or above min. mcp-go logs every
// request at info with its session ID (a bearer credential for the session),
// and toolgate logs calls itself, so mcp-go gets a logger that keeps only
// its warnings and errors.
type quietHandler struct {
	slog.Handler
	min slog.Level
}

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as), h.min}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name), h.min}
}
