package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/gateway/internal/callcache"
	"github.com/toolgate/toolgate/gateway/internal/callshare"
	"github.com/toolgate/toolgate/gateway/internal/catalogtool"
	"github.com/toolgate/toolgate/gateway/internal/events"
	"github.com/toolgate/toolgate/gateway/internal/gatewaymetrics"
	"github.com/toolgate/toolgate/gateway/internal/handles"
	"github.com/toolgate/toolgate/gateway/internal/hooks"
	"github.com/toolgate/toolgate/gateway/internal/inflight"
	"github.com/toolgate/toolgate/gateway/internal/mcpfront"
	"github.com/toolgate/toolgate/gateway/internal/reloadplan"
	"github.com/toolgate/toolgate/gateway/internal/resilience"
	"github.com/toolgate/toolgate/gateway/internal/restsource"
	"github.com/toolgate/toolgate/gateway/internal/threadname"
	"github.com/toolgate/toolgate/gateway/internal/upstreamset"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/buildinfo"
	"github.com/toolgate/toolgate/internal/cluster"
	"github.com/toolgate/toolgate/internal/loopguard"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/telemetry/otlp"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/threadctx"
)

// Version is reported to clients in the initialize result unless
// [WithVersion] sets another.
const Version = buildinfo.Devel

// defaultMaxBytesPerPrincipal is threads.max_bytes_per_principal when the
// configuration leaves it 0.
const defaultMaxBytesPerPrincipal = 64 << 20

type options struct {
	logger  *slog.Logger
	version string
	browser oauthclient.Browser
	// cacheNow is the result caches' clock; nil means time.Now (tests
	// give a fake one).
	cacheNow func() time.Time
}

// Option configures [New].
type Option func(*options)

// WithLogger sets the logger. The default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithVersion sets the version reported to clients.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// Gateway is one toolgate instance: a registry of tools, the executors that
// run them, the call pipeline and the MCP front that exposes them. Build it
// with [New], add tools with [Gateway.RegisterStateless] and
// [Gateway.RegisterStateful] (before or while serving), serve it, and call
// [Gateway.Shutdown] or [Gateway.Close] when done. Its methods are safe for
// concurrent use.
type Gateway struct {
	cfg     *config.Config
	logger  *slog.Logger
	version string
	browser oauthclient.Browser // for upstreams' inline authorization; nil in serve

	reg         *registry.Registry
	dispatcher  *executors.Dispatcher
	stateful    *executors.Stateful
	rest        *rest.Executor
	ups         upstreamset.Set                   // the upstream MCP servers (upstream.go)
	srcs        sourceSet                         // the rest and openapi sources as configured (sources.go)
	lastReload  atomic.Pointer[reloadplan.Status] // the last reload's outcome, for /readyz (apply.go); nil before one
	pool        *threadctx.Pool
	metrics     *gatewaymetrics.Metrics
	limiter     atomic.Pointer[callshare.Limiter] // the slots of new calls; a reload may replace it (live.go)
	live        atomic.Pointer[liveSettings]      // the settings a reload changes while serving (live.go)
	res         *resilience.Planner
	events      *events.Bus // call lifecycle events (events.go)
	front       *mcpfront.Front
	searchFront bool                               // whether front lists the search meta-tools (catalog.mode: search)
	endpoints   []*endpoint                        // config endpoints: virtual servers (endpoints.go)
	auth        *auth.Authenticator                // nil without authentication (auth.go)
	authLive    atomic.Pointer[auth.Authenticator] // the tokens a reload applied, replacing auth's; nil before (auth.go)
	redis       *cluster.Redis                     // nil without cluster.redis (redis.go)
	tracer      *telemetry.Tracer                  // nil without tracing (docs/tracing.md)
	unsubscribe func()
	regMu       sync.Mutex // serialises Register* and Unregister

	execMu sync.Mutex
	execs  map[execKey]executors.Executor // guarded by execMu: each tool's executor, by source and name (routes.go)
	routes atomic.Pointer[map[string]*route]
	// routesMu serialises the writers of routes: syncTools, and replan
	// (which writes each route's plan).
	routesMu sync.Mutex

	useMu sync.Mutex   // serialises Use
	use   []Middleware // guarded by useMu
	chain atomic.Pointer[Handler]

	// loops is the loop guard's per-thread state; set by New (guard.go).
	loops *loopguard.Guard

	// root is cancelled by Close; it bounds background work such as
	// fetching OpenAPI documents.
	root       context.Context
	rootCancel context.CancelCauseFunc
	calls      inflight.Tracker
	unready    atomic.Bool // set by Unready: the replica is leaving (drain.go)
	oneShot    threadname.OneCall
	sessions   threadname.Sessions // live MCP sessions
	hookSet    []*hooks.Hook       // the configured hooks, in the file's order; set by New, then guarded by useMu (hooks.go)
	// surfaceTools are the tools requests about upstreams' catalogs are
	// recorded as, by name (surfacecall.go).
	surfaceTools sync.Map
	openapi      restsource.State // the OpenAPI sources' skipped operations and sources not loaded (sources.go)
	// catalogs are the catalogs served (catalog: search, catalog.mode:
	// search), all set before the tools are registered, never changed
	// after New (catalogtool.go).
	catalogs *catalogtool.Set

	handles *handles.Keys // mints and checks thread handles (handles.go)
	// handleTools are the tools registered with the thread handle argument
	// (handles.go): stateful tools, and a thread-isolated upstream's.
	handleTools handles.Marks

	audit *audit.Trail // the audit trail (audit.go), or nil

	caches callcache.Set // the sources' result caches (cache.go)

	httpOnce  sync.Once
	router    http.Handler // built by Handler
	closeOnce sync.Once
}

// instructions are sent to clients in the initialize result.
const instructions = "toolgate gateway: every tool behind one endpoint. Tool failures come back as isError results whose text starts with an error class (validation, not_found, timeout, ...); fix validation errors and retry transient ones."

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
	g := &Gateway{cfg: cfg, logger: o.logger, version: o.version, browser: o.browser, reg: registry.New(), execs: map[execKey]executors.Executor{},
		loops: newLoopGuard(cfg), caches: callcache.Set{Now: o.cacheNow}}
	g.live.Store(settingsOf(cfg))
	g.routes.Store(&map[string]*route{})
	// Configured sources are namespaces before their tools arrive (an
	// upstream lists them once connected): name repair never moves a call
	// out of one.
	for _, u := range cfg.Upstreams {
		g.reg.ReserveNamespaces(u.Name)
	}
	for _, o := range cfg.OpenAPI {
		g.reg.ReserveNamespaces(o.Name)
	}
	g.root, g.rootCancel = context.WithCancelCause(context.Background())
	var err error
	g.tracer, err = otlp.New(g.root, otlp.Options{Config: cfg.Telemetry, Logger: g.logger, Version: g.version})
	if err != nil {
		g.rootCancel(err)
		return nil, err
	}
	redisMetrics, err := g.openRedis(cfg)
	if err != nil {
		g.rootCancel(err)
		g.closeTracer()
		return nil, err
	}
	g.pool = threadctx.NewPool(g.poolOptions(g.settings()))
	g.stateful = executors.NewStateful(g.pool)
	g.limiter.Store(limiterOf(&cfg.Defaults))
	g.metrics = gatewaymetrics.New(gatewaymetrics.Sources{
		QueueLength:  func() int { return g.limiter.Load().Stats().Queued() },
		SpansDropped: g.tracer.Dropped,
		Tools:        g.reg.List,
		Instances:    g.pool.Counts,
	})
	if g.redis != nil {
		g.metrics.Registry().MustRegister(redisMetrics...)
	}
	g.res = resilience.New(cfg, resilience.Gauges{CircuitState: g.metrics.CircuitState, BudgetExhausted: g.metrics.BudgetExhausted})
	g.initCaches(cfg)
	g.events = newEventBus(g.metrics.Registry(), cfg, g.redis.Events())
	if g.audit, err = g.openAudit(cfg); err != nil {
		g.events.Close()
		g.redis.Close()
		g.rootCancel(err)
		return nil, err
	}
	g.dispatcher = executors.NewDispatcher(&executors.DispatcherOptions{
		DefaultTimeout: cfg.Defaults.Timeout.D(),
		Logger:         g.logger,
		OnRetry:        g.metrics.Retry,
	})
	g.rest = rest.New(&rest.Options{
		Logger:     g.logger,
		OnResponse: g.metrics.HTTPResponse,
		OnRetry:    g.metrics.Retry,
	})
	g.auth = auth.New(&cfg.Auth, &auth.Options{Logger: g.logger, Bucket: g.redis.Buckets()})
	principalSessions, authenticate := 0, (func(h http.Handler) http.Handler)(nil)
	if g.auth != nil {
		principalSessions, authenticate = cfg.Auth.SessionCap(), g.authenticate
	}
	s := cfg.Server
	self, peers := replicaOf(cfg, g.metrics.Registry())
	if peers != nil && g.redis != nil {
		peers.LiveFunc = g.redis.Members // named threads owned among the replicas live
	}
	g.handles = handles.NewKeys(self)
	if cfg.Cluster != nil {
		g.handleTools.Header = handles.HeaderName
	}
	frontOpts := mcpfront.Options{
		Name: "toolgate", Version: g.version, Instructions: instructions,
		Replica: self, Peers: peers, HandleOwner: g.handles.Owner,
		Logger:  g.logger,
		MCPPath: s.MCPPath, SSE: s.SSE, SessionIdleTTL: s.SessionIdleTTL.D(), MaxSessions: s.MaxSessions,
		MaxBodyBytes: s.MaxBodyBytes, ReadTimeout: s.ReadTimeout.D(), AllowedOrigins: s.AllowedOrigins,
		MaxSessionsPerPrincipal: principalSessions, Authenticate: authenticate,
		Tracer: g.tracer,
	}
	g.searchFront = cfg.Catalog.Search()
	g.front = mcpfront.New(frontBackend{g: g, search: g.searchFront}, frontOpts)
	g.endpoints = g.newEndpoints(cfg, frontOpts)
	metaTools := g.trackingCatalogs(cfg)
	g.unsubscribe = g.reg.Subscribe(g.syncTools)
	// Every problem of the file at once: REST and OpenAPI sources, then
	// upstreams.
	bounds, restErr := g.restTools(cfg)
	bounds = append(metaTools, bounds...)
	if err := joinProblems(restErr, g.buildUpstreams(cfg), g.buildHooks(cfg)); err != nil {
		g.Close()
		return nil, err
	}
	if len(bounds) > 0 {
		if err := g.register(bounds...); err != nil {
			g.Close()
			return nil, err
		}
	}
	g.recordSources(cfg)
	if cfg.BatchTool {
		if err := g.addBatchTool(); err != nil {
			g.Close()
			return nil, err
		}
	}
	// Built last: its steps decide at build time what is configured (the
	// loop guard, hooks). Nothing calls before New returns.
	g.chain.Store(new(g.buildChain(nil)))
	return g, nil
}

// joinProblems joins the problems of errs, each an error or a join of
// them, into one flat join in file order, so a caller prints one
// file:line:col problem per line.
func joinProblems(errs ...error) error {
	var all []error
	for _, err := range errs {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			all = append(all, j.Unwrap()...)
		} else if err != nil {
			all = append(all, err)
		}
	}
	slices.SortStableFunc(all, func(a, b error) int {
		pa, _ := errors.AsType[*config.PosError](a)
		pb, _ := errors.AsType[*config.PosError](b)
		if pa == nil || pb == nil {
			return 0
		}
		return cmp.Or(cmp.Compare(pa.Line, pb.Line), cmp.Compare(pa.Col, pb.Col))
	})
	return errors.Join(all...)
}

// Use adds middleware around the dispatch of every call, after the call
// has been resolved, validated and given its thread: the first added is
// the outermost. Calls that start after Use returns go through it.
func (g *Gateway) Use(mw ...Middleware) {
	g.useMu.Lock()
	defer g.useMu.Unlock()
	g.use = append(g.use, mw...)
	g.chain.Store(new(g.buildChain(g.use)))
}

// Call runs one call through the whole pipeline, as if a client had sent
// it: name resolution (with repair when enabled), validation, dispatch.
// args is the JSON arguments object (nil or empty means {}). meta is the
// request's _meta (it may name a thread with [ThreadMetaKey]); without a
// thread the call runs in a fresh one-call thread. An unknown tool is
// returned as an error wrapping registry.ErrNotFound; every other failure is
// a result with IsError set. An upstream MCP tool's result comes with its
// content decoded into Content and Structured, and the upstream's JSON in
// Passthrough.
func (g *Gateway) Call(ctx context.Context, name string, args json.RawMessage, meta map[string]any) (*Result, error) {
	c := &Call{Name: name, Raw: args, Meta: meta}
	if id := g.embedderIdentity(ctx); id != nil {
		c.ident, c.Principal = id, id.Name
	}
	res, err := g.handle(ctx, c)
	if err != nil {
		return nil, err
	}
	// An upstream's result, forwarded to MCP clients as raw JSON: an
	// embedder reads it as content parts like any other.
	return res.decoded(), nil
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
	return g.register(executors.Bound{Tool: t, Exec: fn})
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
	// Clients without a session keep its state through thread handles
	// (handles.go).
	t, takes := handles.WithArg(t, g.handleTools.Header)
	if err := g.register(executors.Bound{Tool: t, Exec: g.stateful.Bind(t.Name, f)}); err != nil {
		return err
	}
	g.handleTools.SetStateful(t.Name, takes)
	return nil
}

// register adds tools to the registry with their executors set first, so
// no client can see a tool before it can run; all or none. A rejected tool
// leaves an existing tool of that name untouched.
func (g *Gateway) register(bs ...executors.Bound) error {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	tools := make([]registry.Tool, len(bs))
	for i, b := range bs {
		tools[i] = b.Tool
		if _, taken := g.reg.Get(b.Tool.Name); taken {
			return g.reg.Add(tools[:i+1]...) // fails, with the error naming both sources
		}
	}
	return g.bind(bs, func() error { return g.reg.Add(tools...) })
}

// Unregister removes tools by name and returns the names removed. Connected
// clients are told through notifications/tools/list_changed.
func (g *Gateway) Unregister(names ...string) []string {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	sources := make(map[string]string, len(names))
	for _, n := range names {
		if t, ok := g.reg.Get(n); ok {
			sources[n] = t.Source
		}
	}
	removed := g.reg.Remove(names...)
	for _, n := range removed {
		g.dropExecs(sources[n], n)
	}
	return removed
}

// Tools returns the registered tools sorted by name.
func (g *Gateway) Tools() []*registry.Tool { return g.reg.List() }

// Shutdown stops the gateway gracefully: new calls are refused with class
// unavailable, calls in flight may finish until ctx is done, after which
// they are cancelled (their clients get a cancelled result); then sessions
// are closed and every thread instance and upstream is closed. A stdio
// upstream is asked to exit (its stdin closed, then SIGTERM) within what
// is left of ctx; one still running when ctx is done is killed
// ([Gateway.KillUpstreams]), so a ctx that is already done cancels the
// calls and kills the upstreams at once. Shutdown still waits for Close,
// which may wait up to 5 s for an HTTP upstream to answer its session's
// DELETE. It returns ctx's error if the grace period ran out.
func (g *Gateway) Shutdown(ctx context.Context) error {
	err := g.drain(ctx)
	stop := context.AfterFunc(ctx, g.KillUpstreams)
	defer stop()
	g.Close()
	return err
}

// Drain is Shutdown's first half, for a program that closes the gateway
// on its own terms: new calls are refused with class unavailable, calls in
// flight may finish until ctx is done, after which they are cancelled and
// given a moment to return their results. Close the gateway after it. It
// returns ctx's error if the grace period ran out.
func (g *Gateway) Drain(ctx context.Context) error { return g.drain(ctx) }

// drain refuses new calls and waits for the calls in flight until ctx is
// done; then it cancels them and waits briefly for their results to go
// out. It returns ctx's error if ctx ended first.
func (g *Gateway) drain(ctx context.Context) error {
	err := g.calls.Drain(ctx)
	if err != nil {
		g.logger.Warn("shutdown grace ran out; cancelling calls in flight", "in_flight", g.calls.Count())
		g.calls.CancelAll(errShutdown)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownCancelWait)
		_ = g.calls.Drain(wctx)
		cancel()
	}
	return err
}

// KillUpstreams sends SIGKILL to every stdio upstream process the gateway
// runs (each with its process group), and to any it starts from now on,
// without waiting for them to exit. Close asks a process to exit by
// closing its stdin, then SIGTERM, and waits up to 4 s for that; a program
// that must stop at once (a second signal during shutdown) calls
// KillUpstreams before Close, or before exiting without Close, so that no
// upstream outlives it. It stops the gateway taking calls and cancels the
// calls in flight first, as Close does, so that they end as cancelled,
// not as the lost connection the kill would make of them.
func (g *Gateway) KillUpstreams() {
	g.calls.StartDraining()
	g.calls.CancelAll(errShutdown)
	g.ups.Kill()
}

// Close stops the gateway at once: calls in flight are cancelled, sessions
// and thread instances are closed, background goroutines stop. It is safe
// to call more than once.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		g.calls.StartDraining()
		g.calls.CancelAll(errShutdown)
		g.rootCancel(errShutdown)
		g.events.Close()
		for _, f := range g.fronts() {
			f.Close()
		}
		g.unsubscribe()
		g.ups.Close() // kills and reaps every upstream process
		g.pool.Close()
		g.rest.Close()
		g.redis.Close()
		_ = g.audit.Close()
		g.closeTracer() // last: the spans of everything above are flushed
	})
	return nil
}

// closeTracer flushes the spans still queued, for at most traceFlushWait,
// and stops the exporter.
func (g *Gateway) closeTracer() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.root), traceFlushWait)
	defer cancel()
	_ = g.tracer.Close(ctx)
}

// traceFlushWait bounds flushing the last spans when the gateway closes:
// a collector that hangs must not hold the shutdown.
const traceFlushWait = 3 * time.Second
