package gateway

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors/mcpup"
)

// upstreamSet holds the upstream MCP servers the gateway runs, each in a
// manager of its own, so that one can be added, removed or replaced while
// the others keep their processes and sessions (a reload,
// [Gateway.AddUpstream], [Gateway.RemoveUpstream]).
type upstreamSet struct {
	// mu guards byName and started; never held across a manager's Start or
	// Close.
	mu      sync.Mutex
	byName  map[string]*liveUpstream
	started bool // StartUpstreams was called: an upstream added later starts at once
}

// liveUpstream is one upstream: its settings as configured (to tell a
// changed one from an unchanged one) and its manager.
type liveUpstream struct {
	cfg config.Upstream
	m   *mcpup.Manager
}

// get returns the manager of the upstream called name, or nil.
func (s *upstreamSet) get(name string) *mcpup.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.byName[name]; u != nil {
		return u.m
	}
	return nil
}

// namespace returns the prefix of the tool and prompt names of the
// upstream called name, or "" when there is none by that name.
func (s *upstreamSet) namespace(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.byName[name]; u != nil {
		return upstreamOf(u.cfg, nil).NamePrefix()
	}
	return ""
}

// all returns every manager, in name order.
func (s *upstreamSet) all() []*mcpup.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := slices.Sorted(maps.Keys(s.byName))
	ms := make([]*mcpup.Manager, len(names))
	for i, n := range names {
		ms[i] = s.byName[n].m
	}
	return ms
}

// configured returns the settings of every upstream, by name.
func (s *upstreamSet) configured() map[string]config.Upstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]config.Upstream, len(s.byName))
	for n, u := range s.byName {
		out[n] = u.cfg
	}
	return out
}

// put records u under its name, starting it when the set has started,
// and returns the one it replaces, or nil.
func (s *upstreamSet) put(u *liveUpstream) (old *liveUpstream) {
	s.mu.Lock()
	if s.byName == nil {
		s.byName = map[string]*liveUpstream{}
	}
	old = s.byName[u.cfg.Name]
	s.byName[u.cfg.Name] = u
	started := s.started
	s.mu.Unlock()
	if started {
		u.m.Start()
	}
	return old
}

// take removes the upstream called name and returns it, or nil.
func (s *upstreamSet) take(name string) *liveUpstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.byName[name]
	delete(s.byName, name)
	return u
}

// start starts every upstream, and those added from now on.
func (s *upstreamSet) start() {
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	for _, m := range s.all() {
		m.Start()
	}
}

// status reports whether each upstream is up, or nil without upstreams.
func (s *upstreamSet) status() map[string]bool {
	var st map[string]bool
	for _, m := range s.all() {
		if st == nil {
			st = map[string]bool{}
		}
		maps.Copy(st, m.Status())
	}
	return st
}

// needsAuth is the upstreams waiting for a person to authorize them
// ([mcpup.Manager.NeedsAuth]), by name, each with why.
func (s *upstreamSet) needsAuth() map[string]string {
	out := map[string]string{}
	for _, m := range s.all() {
		maps.Copy(out, m.NeedsAuth())
	}
	return out
}

// withOAuth is the names of the upstreams with oauth, sorted.
func (s *upstreamSet) withOAuth() []string {
	var names []string
	for name, u := range s.configured() {
		if u.OAuth != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// kill kills every upstream process ([mcpup.Manager.Kill]).
func (s *upstreamSet) kill() {
	for _, m := range s.all() {
		m.Kill()
	}
}

// close closes every manager, at once, and waits for them.
func (s *upstreamSet) close() {
	var wg sync.WaitGroup
	for _, m := range s.all() {
		wg.Go(func() { _ = m.Close() })
	}
	wg.Wait()
}

// setLogLevel passes a session's log level to every upstream.
func (s *upstreamSet) setLogLevel(ctx context.Context, level string) {
	for _, m := range s.all() {
		m.SetLogLevel(ctx, level)
	}
}

// sameUpstream reports whether a and b configure the same upstream, so
// that a reload keeps its process and sessions.
func sameUpstream(a, b config.Upstream) bool { return reflect.DeepEqual(a, b) }
