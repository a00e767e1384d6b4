package gateway

import (
	"cmp"
	"reflect"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/callshare"
	"github.com/toolgate/toolgate/gateway/internal/loopstep"
	"github.com/toolgate/toolgate/threadctx"
)

// liveSettings are the settings besides the sources that a reload applies
// while serving (issue 27 item 1): guards, defaults (but catalog),
// threads, batch_tool, and auth's session and instance caps. A call reads
// them as it starts, through the chain (the loop guard), the limiter, the
// dispatcher's timeout and its route's retry plan, so calls in flight keep
// those they started with. A value is never changed: a reload stores a new
// one (Gateway.live).
type liveSettings struct {
	guards    config.Guards
	defaults  config.Defaults
	threads   config.Threads
	batchTool bool
	// maxSessions and maxInstances are auth.max_sessions and
	// auth.max_instances.
	maxSessions, maxInstances int
}

// settingsOf returns cfg's live settings.
func settingsOf(cfg *config.Config) *liveSettings {
	return &liveSettings{guards: cfg.Guards, defaults: cfg.Defaults, threads: cfg.Threads, batchTool: cfg.BatchTool,
		maxSessions: cfg.Auth.MaxSessions, maxInstances: cfg.Auth.MaxInstances}
}

// settings returns the live settings in force.
func (g *Gateway) settings() *liveSettings { return g.live.Load() }

// poolOptions are the thread pool's options under s.
func (g *Gateway) poolOptions(s *liveSettings) *threadctx.Options {
	return &threadctx.Options{
		IdleTTL:      s.threads.IdleTTL.D(),
		MaxInstances: s.threads.MaxInstances,
		PerOwner:     s.maxInstances,
		// Without authentication everyone is principal "": this bounds
		// what loopback clients can make stateful tools hold together.
		MaxBytesPerOwner: cmp.Or(s.threads.MaxBytesPerPrincipal, defaultMaxBytesPerPrincipal),
		Logger:           g.logger,
	}
}

// planSettings notes which live settings cfg changes, and keeps the new
// ones for run; auth's caps only when planAuth found them live.
func (g *Gateway) planSettings(cfg *config.Config, p *applyPlan) {
	cur := g.settings()
	next := *settingsOf(cfg)
	next.defaults.Catalog = cur.defaults.Catalog // needs a restart
	if !p.authCaps {
		next.maxSessions, next.maxInstances = cur.maxSessions, cur.maxInstances
	}
	for _, d := range []struct {
		key  string
		a, b any
	}{
		{"guards", cur.guards, next.guards},
		{"defaults", cur.defaults, next.defaults},
		{"threads", cur.threads, next.threads},
		{"batch_tool", cur.batchTool, next.batchTool},
		{"auth.max_sessions", cur.maxSessions, next.maxSessions},
		{"auth.max_instances", cur.maxInstances, next.maxInstances},
	} {
		if !reflect.DeepEqual(d.a, d.b) {
			p.applied.Changed = append(p.applied.Changed, d.key)
			p.settings = &next
		}
	}
}

// limiterOf returns the limiter of d's limits.
func limiterOf(d *config.Defaults) *callshare.Limiter {
	return callshare.New(callshare.Limits{Global: d.MaxParallel, PerKey: d.MaxParallelPerSession, PerPrincipal: d.MaxParallelPerPrincipal, Queue: d.MaxQueue})
}

// setSettings puts s in force in place of old: the calls that start from
// now on run under it. The batch tool, added or removed, reaches clients
// as notifications/tools/list_changed.
func (g *Gateway) setSettings(old, s *liveSettings) error {
	g.live.Store(s)
	if d, o := s.defaults, old.defaults; d.MaxParallel != o.MaxParallel || d.MaxParallelPerSession != o.MaxParallelPerSession ||
		d.MaxParallelPerPrincipal != o.MaxParallelPerPrincipal || d.MaxQueue != o.MaxQueue {
		// Calls holding or waiting for a slot of the limiter before
		// keep it; new calls take slots of the new one.
		g.limiter.Store(limiterOf(&s.defaults))
	}
	g.dispatcher.SetDefaultTimeout(s.defaults.Timeout.D())
	if g.res.SetDefaults(s.defaults, nil) {
		g.replan()
	}
	if old.threads != s.threads || old.maxInstances != s.maxInstances {
		g.pool.SetLimits(g.poolOptions(s))
	}
	g.loops.SetOptions(loopstep.Options(s.guards, s.threads))
	if old.maxSessions != s.maxSessions {
		n := (&config.Auth{MaxSessions: s.maxSessions}).SessionCap()
		for _, f := range g.fronts() { // each endpoint's sessions are capped apart
			f.SetMaxSessionsPerPrincipal(n)
		}
	}
	if !reflect.DeepEqual(old.guards, s.guards) {
		g.useMu.Lock()
		g.chain.Store(new(g.buildChain(g.use))) // the loop guard step as the new guards say
		g.useMu.Unlock()
	}
	switch {
	case s.batchTool && !old.batchTool:
		return g.addBatchTool()
	case !s.batchTool && old.batchTool:
		g.Unregister(BatchToolName)
	}
	return nil
}
