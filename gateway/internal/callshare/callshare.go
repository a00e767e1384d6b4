// Package callshare bounds the tool calls that run at once and shares the
// slots fairly (issue 31): at most Limits.Global in all, at most a
// principal's share for one principal, at most Limits.PerKey for one key
// (a session, or an explicit thread), and bounded queues of calls waiting
// at each level. A call that finds full the queue it has to wait in fails
// with class rate_limited, with an error naming the defaults.* setting
// that bounds it.
//
// A call's [Hold] is the Holder of package internal/callslot: while the
// call waits for its client it gives its slots back, and takes them again
// once answered.
//
// It knows nothing of the gateway or of the config file (the gateway
// passes plain [Limits]; only the errors name the settings), nor of the
// metrics (they read [Limiter.Stats]).
package callshare

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/retry"
)

// Limits are a Limiter's bounds.
type Limits struct {
	// Global is the most calls running at once (defaults.max_parallel).
	Global int
	// PerKey is the most calls of one key running at once
	// (defaults.max_parallel_per_session).
	PerKey int
	// PerPrincipal is one principal's share of Global
	// (defaults.max_parallel_per_principal); 0 means half of Global,
	// rounded up.
	PerPrincipal int
	// Queue bounds each level's waiting calls (defaults.max_queue).
	Queue int
}

// Limiter bounds the tool calls that run at once, by its [Limits]. Waiting
// is FIFO per queue: slots are granted in arrival order (Go's channel send
// order).
//
// A slot is taken in three steps, the key's, the principal's, then the
// global one, so that a session or a principal that floods toolgate waits
// on its own slots and never holds global slots it may not use: another
// principal's call finds a global slot free, or waits behind at most the
// share of each principal, not behind everything one principal sent. The
// waits have separate queues, bounded apart: at most Queue calls wait for
// a global slot; at most Queue wait for their principal's share, at most
// half of that (rounded up) for one principal; at most Queue wait for
// their key's slot, at most half of that for one key. All told at most
// 3 × Queue calls wait.
//
// A call waiting for its client ([Hold.Park]) gives its slots back and
// takes them again, waiting as long as its ctx allows, past the queue
// bounds: the call was admitted once, and the calls parked at once are
// bounded elsewhere (per call and per principal, by the relay and the
// continuations).
type Limiter struct {
	global chan struct{} // a token per running call
	queue  int

	mu      sync.Mutex
	waiting int  // calls waiting for a global slot; guarded by mu
	keys    tier // guarded by mu
	princ   tier // guarded by mu
}

// tier is one level of per-group slots: keys, or principals. Its fields
// are guarded by Limiter.mu.
type tier struct {
	limit   int               // slots per group
	what    string            // names the group and its setting in errors
	others  string            // names the groups in errors: "sessions", "principals"
	waiting int               // calls waiting for their group's slot, all groups together
	groups  map[string]*group // the groups with calls holding or waiting
	// free are slots whose group had no call left, kept for the next new
	// group (a session's slot is dropped after each of its calls, so
	// without them every call would make one); at most maxFreeSlots.
	free []*group
}

// maxFreeSlots bounds tier.free.
const maxFreeSlots = 64

// group is one key's or principal's semaphore; refs counts the calls
// holding or waiting for it, so that it is dropped with the last one.
type group struct {
	sem     chan struct{}
	refs    int // guarded by Limiter.mu
	waiting int // calls waiting for sem; guarded by Limiter.mu
}

// New returns a Limiter of lim.
func New(lim Limits) *Limiter {
	share := lim.PerPrincipal
	if share <= 0 {
		share = (lim.Global + 1) / 2
	}
	return &Limiter{
		global: make(chan struct{}, lim.Global), queue: lim.Queue,
		keys:  tier{limit: lim.PerKey, others: "sessions", what: "this session already runs its limit of %d (defaults.max_parallel_per_session)", groups: map[string]*group{}},
		princ: tier{limit: share, others: "principals", what: "your principal already runs its share of %d (defaults.max_parallel_per_principal)", groups: map[string]*group{}},
	}
}

// slots is what a call holds: its key's and its principal's slot (nil
// for none) besides a global one.
type slots struct {
	key, principal string
	ks, ps         *group
}

// Acquire takes a slot for a call of key and principal ("" means no limit
// at that level). It returns the call's [Hold], to end with [Hold.End],
// and how long the call waited. It fails with rate_limited when the queue
// it would wait in is full, and with ctx's error (for the caller to
// classify) when ctx ends while waiting.
func (l *Limiter) Acquire(ctx context.Context, key, principal string) (h *Hold, waited time.Duration, err error) {
	s := slots{key: key, principal: principal}
	l.mu.Lock()
	s.ks = l.keys.join(key)
	s.ps = l.princ.join(principal)
	l.mu.Unlock()

	// The fast path: free slots at every level, no queueing.
	if l.tryTake(s) {
		return &Hold{l: l, s: s, held: true}, 0, nil
	}
	start := time.Now()
	err = l.take(ctx, s, true)
	waited = time.Since(start)
	if err != nil {
		l.drop(s)
		return nil, waited, err
	}
	return &Hold{l: l, s: s, held: true}, waited, nil
}

// take takes s's slots level by level, waiting in each level's queue
// (bounded when bounded is set); on failure it holds none.
func (l *Limiter) take(ctx context.Context, s slots, bounded bool) error {
	if s.ks != nil {
		if err := l.takeGroup(ctx, &l.keys, s.ks, bounded); err != nil {
			return err
		}
	}
	if s.ps != nil {
		if err := l.takeGroup(ctx, &l.princ, s.ps, bounded); err != nil {
			give(s.ks)
			return err
		}
	}
	if err := l.takeGlobal(ctx, bounded); err != nil {
		give(s.ps)
		give(s.ks)
		return err
	}
	return nil
}

// join returns name's group, counting one more call of it; nil for the
// name "". Limiter.mu is held.
func (t *tier) join(name string) *group {
	if name == "" {
		return nil
	}
	g := t.groups[name]
	if g == nil {
		if n := len(t.free); n > 0 {
			g, t.free = t.free[n-1], t.free[:n-1]
		} else {
			g = &group{sem: make(chan struct{}, t.limit)}
		}
		t.groups[name] = g
	}
	g.refs++
	return g
}

// leave forgets one call of name's group g, and g with its last call.
// Limiter.mu is held.
func (t *tier) leave(name string, g *group) {
	if g == nil {
		return
	}
	g.refs--
	if g.refs == 0 {
		// No call holds or waits for it: its semaphore is empty.
		delete(t.groups, name)
		if len(t.free) < maxFreeSlots {
			t.free = append(t.free, g)
		}
	}
}

// tryTake takes every slot of s if all are free at once.
func (l *Limiter) tryTake(s slots) bool {
	if !tryTakeGroup(s.ks) {
		return false
	}
	if !tryTakeGroup(s.ps) {
		give(s.ks)
		return false
	}
	select {
	case l.global <- struct{}{}:
		return true
	default:
		give(s.ps)
		give(s.ks)
		return false
	}
}

// tryTakeGroup takes a slot of g (nil: nothing to take) if one is free.
func tryTakeGroup(g *group) bool {
	if g == nil {
		return true
	}
	select {
	case g.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// give gives back a slot of g (nil: nothing to give).
func give(g *group) {
	if g != nil {
		<-g.sem
	}
}

// takeGroup takes a slot of g, of tier t, waiting in t's queue if need be.
func (l *Limiter) takeGroup(ctx context.Context, t *tier, g *group, bounded bool) error {
	if tryTakeGroup(g) {
		return nil
	}
	l.mu.Lock()
	if perGroup := (l.queue + 1) / 2; bounded && g.waiting >= perGroup {
		l.mu.Unlock()
		return retry.Errorf(retry.RateLimited, "too many calls at once: "+t.what+" and has %d more waiting, as many as one may queue (half of defaults.max_queue); wait for some to finish, then call again", t.limit, perGroup)
	}
	if bounded && t.waiting >= l.queue {
		l.mu.Unlock()
		return retry.Errorf(retry.RateLimited, "too many calls at once: "+t.what+", and %d calls of %s at their limit already wait (defaults.max_queue); wait for some to finish, then call again", t.limit, l.queue, t.others)
	}
	g.waiting++
	t.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		g.waiting--
		t.waiting--
		l.mu.Unlock()
	}()
	select {
	case g.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeGlobal takes a global slot, waiting in the global queue if need be.
func (l *Limiter) takeGlobal(ctx context.Context, bounded bool) error {
	select {
	case l.global <- struct{}{}:
		return nil
	default:
	}
	l.mu.Lock()
	if bounded && l.waiting >= l.queue {
		l.mu.Unlock()
		return retry.Errorf(retry.RateLimited, "toolgate is at its limit: it runs its maximum of %d calls at once (defaults.max_parallel) and the queue of %d waiting calls is full (defaults.max_queue); call again shortly", cap(l.global), l.queue)
	}
	l.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}()
	select {
	case l.global <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// giveAll gives back s's slots, keeping s's place in its groups.
func (l *Limiter) giveAll(s slots) {
	<-l.global
	give(s.ps)
	give(s.ks)
}

// drop forgets one call of s's groups.
func (l *Limiter) drop(s slots) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys.leave(s.key, s.ks)
	l.princ.leave(s.principal, s.ps)
}

// Stats is a snapshot of a Limiter's slots and queues.
type Stats struct {
	Global  int // global slots (Limits.Global)
	Running int // global slots taken
	// Waiting are the calls waiting for a global slot (at most
	// Limits.Queue), WaitingForGroups those waiting for their key's or
	// their principal's slot (at most 2 × Limits.Queue).
	Waiting, WaitingForGroups int
}

// Queued returns how many calls wait for a slot of any level.
func (s Stats) Queued() int { return s.Waiting + s.WaitingForGroups }

// Stats returns l's slots and queues as they are now.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{
		Global: cap(l.global), Running: len(l.global),
		Waiting: l.waiting, WaitingForGroups: l.keys.waiting + l.princ.waiting,
	}
}

// Hold is a running call's hold on its slots, which it may give back
// while it waits for its client (a callslot.Holder).
type Hold struct {
	l *Limiter
	s slots

	mu     sync.Mutex // guards parked, held and ended; held across resume's wait
	parked int        // Park calls not yet resumed
	held   bool       // the call holds its slots
	ended  bool       // the call is over: a late resume takes nothing
}

// Park gives the call's slots back until the last resume takes them again.
func (h *Hold) Park() func(ctx context.Context) error {
	h.mu.Lock()
	h.parked++
	if h.parked == 1 && h.held {
		h.l.giveAll(h.s)
		h.held = false
	}
	h.mu.Unlock()
	var once sync.Once
	return func(ctx context.Context) (err error) {
		once.Do(func() { err = h.resume(ctx) })
		return err
	}
}

// resume ends one Park: the last takes the slots again, waiting past the
// queue bounds for as long as ctx allows.
func (h *Hold) resume(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.parked--; h.parked > 0 || h.held || h.ended {
		return nil
	}
	if err := h.l.take(ctx, h.s, false); err != nil {
		return err
	}
	h.held = true
	return nil
}

// End gives back what the call still holds and forgets it.
func (h *Hold) End() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.l.giveAll(h.s)
		h.held = false
	}
	h.ended = true
	h.l.drop(h.s)
}
