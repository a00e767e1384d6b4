// Package upstreamset is the set of upstream MCP servers a gateway runs,
// each in an [mcpup.Manager] of its own, so that one can be added, removed
// or replaced (a reload, an embedder's AddUpstream) while the others keep
// their processes and sessions; and the rules of the upstreams as a set:
// their names and prefixes ([NameErrors]), which listed tools the
// registry can take ([Servable]), and which clients an upstream's
// notification is for ([Notify]).
//
// It does not build the managers (the gateway does, wiring their tools,
// state and catalogs into its registry, metrics and fronts), and it knows
// nothing of the gateway, its metrics or its MCP fronts beyond the small
// interfaces it names here.
package upstreamset

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors/mcpup"
)

// Set holds the running upstreams by name. Its zero value is an empty
// set, not started.
type Set struct {
	// mu guards byName and started; never held across a manager's Start
	// or Close.
	mu      sync.Mutex
	byName  map[string]*Upstream
	started bool // Start was called: an upstream put later starts at once
}

// Upstream is one upstream: its settings as configured (to tell a
// changed one from an unchanged one) and its manager.
type Upstream struct {
	Config  config.Upstream
	Manager *mcpup.Manager
}

// Same reports whether a and b configure the same upstream, so that a
// reload keeps its process and sessions.
func Same(a, b config.Upstream) bool { return reflect.DeepEqual(a, b) }

// Spec is the mcpup form of the configured upstream u, whose secrets (to
// scrub from what it says) are secrets, but for its OAuth client (the
// gateway adds it).
func Spec(u config.Upstream, secrets []string) mcpup.Upstream {
	return mcpup.Upstream{
		Name:            u.Name,
		Prefix:          u.Prefix,
		Transport:       u.Transport,
		Command:         u.Command,
		Args:            u.Args,
		Env:             u.Env,
		Cwd:             u.Cwd,
		InheritEnv:      u.InheritEnv,
		URL:             u.URL,
		Headers:         u.Headers,
		Isolation:       u.Isolation,
		Include:         u.Include,
		Exclude:         u.Exclude,
		Timeout:         u.Timeout.D(),
		StartupTimeout:  u.StartupTimeout.D(),
		MaxMessageBytes: u.MaxMessageBytes,
		Idempotent:      u.Idempotent,
		Secrets:         secrets,
	}
}

// Get returns the manager of the upstream called name, or nil.
func (s *Set) Get(name string) *mcpup.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.byName[name]; u != nil {
		return u.Manager
	}
	return nil
}

// Namespace returns the prefix of the tool and prompt names of the
// upstream called name, or "" when there is none by that name.
func (s *Set) Namespace(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.byName[name]; u != nil {
		return Spec(u.Config, nil).NamePrefix()
	}
	return ""
}

// All returns every manager, in name order.
func (s *Set) All() []*mcpup.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := slices.Sorted(maps.Keys(s.byName))
	ms := make([]*mcpup.Manager, len(names))
	for i, n := range names {
		ms[i] = s.byName[n].Manager
	}
	return ms
}

// Configured returns the settings of every upstream, by name.
func (s *Set) Configured() map[string]config.Upstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]config.Upstream, len(s.byName))
	for n, u := range s.byName {
		out[n] = u.Config
	}
	return out
}

// Put records u under its name, starting it when the set has started,
// and returns the one it replaces, or nil. The caller closes that one.
func (s *Set) Put(u *Upstream) (old *Upstream) {
	s.mu.Lock()
	if s.byName == nil {
		s.byName = map[string]*Upstream{}
	}
	old = s.byName[u.Config.Name]
	s.byName[u.Config.Name] = u
	started := s.started
	s.mu.Unlock()
	if started {
		u.Manager.Start()
	}
	return old
}

// Take removes the upstream called name and returns it, or nil. The
// caller closes it.
func (s *Set) Take(name string) *Upstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.byName[name]
	delete(s.byName, name)
	return u
}

// Start starts every upstream, and those put from now on.
func (s *Set) Start() {
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	for _, m := range s.All() {
		m.Start()
	}
}

// Status reports whether each upstream is up, or nil without upstreams.
func (s *Set) Status() map[string]bool {
	var st map[string]bool
	for _, m := range s.All() {
		if st == nil {
			st = map[string]bool{}
		}
		maps.Copy(st, m.Status())
	}
	return st
}

// NeedsAuth is the upstreams waiting for a person to authorize them
// ([mcpup.Manager.NeedsAuth]), by name, each with why.
func (s *Set) NeedsAuth() map[string]string {
	out := map[string]string{}
	for _, m := range s.All() {
		maps.Copy(out, m.NeedsAuth())
	}
	return out
}

// WithOAuth is the names of the upstreams with oauth, sorted.
func (s *Set) WithOAuth() []string {
	var names []string
	for name, u := range s.Configured() {
		if u.OAuth != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Wait waits until every upstream is up or waits for a person to
// authorize it (nothing changes then without a person), or ctx is done;
// it returns ctx's error then. Without upstreams it returns at once.
func (s *Set) Wait(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !s.settled() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// settled reports whether every upstream is up or waits for a person.
func (s *Set) settled() bool {
	waiting := s.NeedsAuth()
	for name, up := range s.Status() {
		if _, w := waiting[name]; !up && !w {
			return false
		}
	}
	return true
}

// Kill kills every upstream process ([mcpup.Manager.Kill]).
func (s *Set) Kill() {
	for _, m := range s.All() {
		m.Kill()
	}
}

// Close closes every manager, at once, and waits for them.
func (s *Set) Close() {
	var wg sync.WaitGroup
	for _, m := range s.All() {
		wg.Go(func() { _ = m.Close() })
	}
	wg.Wait()
}

// SetLogLevel passes a session's log level to every upstream.
func (s *Set) SetLogLevel(ctx context.Context, level string) {
	for _, m := range s.All() {
		m.SetLogLevel(ctx, level)
	}
}
