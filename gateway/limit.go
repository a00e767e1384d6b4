package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/retry"
)

// limiter bounds the tool calls that run at once: at most global in all,
// at most perPrincipal for one principal (its fair share: issue 31), at
// most perKey for one key (a session, or an explicit thread), and at most
// queue calls waiting at each level. A call that finds full the queue it
// has to wait in fails with class rate_limited. Waiting is FIFO per queue:
// slots are granted in arrival order (Go's channel send order).
//
// A slot is taken in three steps, the key's, the principal's, then the
// global one, so that a session or a principal that floods toolgate waits
// on its own slots and never holds global slots it may not use: another
// principal's call finds a global slot free, or waits behind at most the
// share of each principal, not behind everything one principal sent. The
// waits have separate queues, bounded apart: at most queue calls wait for
// a global slot; at most queue wait for their principal's share, at most
// half of that (rounded up) for one principal; at most queue wait for
// their key's slot, at most half of that for one key. All told at most
// 3 × queue calls wait.
//
// A call waiting for its client (callslot.Park) gives its slots back and
// takes them again, waiting as long as its ctx allows, past the queue
// bounds: the call was admitted once, and the calls parked at once are
// bounded elsewhere (per call and per principal, by the relay and the
// continuations).
type limiter struct {
	global chan struct{} // a token per running call
	queue  int

	mu      sync.Mutex
	waiting int  // calls waiting for a global slot; guarded by mu
	keys    tier // guarded by mu
	princ   tier // guarded by mu
}

// tier is one level of per-group slots: keys, or principals. Its fields
// are guarded by limiter.mu.
type tier struct {
	limit   int                 // slots per group
	what    string              // names the group and its setting in errors
	others  string              // names the groups in errors: "sessions", "principals"
	waiting int                 // calls waiting for their group's slot, all groups together
	groups  map[string]*keySlot // the groups with calls holding or waiting
	// free are slots whose group had no call left, kept for the next new
	// group (a session's slot is dropped after each of its calls, so
	// without them every call would make one); at most maxFreeSlots.
	free []*keySlot
}

// maxFreeSlots bounds tier.free.
const maxFreeSlots = 64

// keySlot is one group's semaphore; refs counts the calls holding or
// waiting for it, so that it is dropped with the last one.
type keySlot struct {
	sem     chan struct{}
	refs    int // guarded by limiter.mu
	waiting int // calls waiting for sem; guarded by limiter.mu
}

// newLimiter returns a limiter of global slots, perKey per key, perPrincipal
// per principal and queues of queue.
func newLimiter(global, perKey, perPrincipal, queue int) *limiter {
	return &limiter{
		global: make(chan struct{}, global), queue: queue,
		keys:  tier{limit: perKey, others: "sessions", what: "this session already runs its limit of %d (defaults.max_parallel_per_session)", groups: map[string]*keySlot{}},
		princ: tier{limit: perPrincipal, others: "principals", what: "your principal already runs its share of %d (defaults.max_parallel_per_principal)", groups: map[string]*keySlot{}},
	}
}

// limiterOf returns the limiter of d's limits.
func limiterOf(d *config.Defaults) *limiter {
	return newLimiter(d.MaxParallel, d.MaxParallelPerSession, principalShare(d), d.MaxQueue)
}

// principalShare is defaults.max_parallel_per_principal, 0 meaning half
// of max_parallel (rounded up).
func principalShare(d *config.Defaults) int {
	if d.MaxParallelPerPrincipal > 0 {
		return d.MaxParallelPerPrincipal
	}
	return (d.MaxParallel + 1) / 2
}

// slots is what a call holds: its key's and its principal's slot (nil
// for none) besides a global one.
type slots struct {
	key, principal string
	ks, ps         *keySlot
}

// acquire takes a slot for a call of key and principal ("" means no limit
// at that level). It returns the slots to give back with release, and how
// long the call waited. It fails with rate_limited when the queue it
// would wait in is full, and with ctx's error (classified by the caller)
// when ctx ends while waiting.
func (l *limiter) acquire(ctx context.Context, key, principal string) (s slots, waited time.Duration, err error) {
	s = slots{key: key, principal: principal}
	l.mu.Lock()
	s.ks = l.keys.join(key)
	s.ps = l.princ.join(principal)
	l.mu.Unlock()

	// The fast path: free slots at every level, no queueing.
	if l.tryTake(s) {
		return s, 0, nil
	}
	start := time.Now()
	err = l.take(ctx, s, true)
	waited = time.Since(start)
	if err != nil {
		l.drop(s)
		return slots{}, waited, err
	}
	return s, waited, nil
}

// take takes s's slots level by level, waiting in each level's queue
// (bounded when bounded is set); on failure it holds none.
func (l *limiter) take(ctx context.Context, s slots, bounded bool) error {
	if s.ks != nil {
		if err := l.takeGroup(ctx, &l.keys, s.ks, bounded); err != nil {
			return err
		}
	}
	if s.ps != nil {
		if err := l.takeGroup(ctx, &l.princ, s.ps, bounded); err != nil {
			l.give(s.ks)
			return err
		}
	}
	if err := l.takeGlobal(ctx, bounded); err != nil {
		l.give(s.ps)
		l.give(s.ks)
		return err
	}
	return nil
}

// join returns group's slot, counting one more call of it; nil for the
// group "". limiter.mu is held.
func (t *tier) join(group string) *keySlot {
	if group == "" {
		return nil
	}
	ks := t.groups[group]
	if ks == nil {
		if n := len(t.free); n > 0 {
			ks, t.free = t.free[n-1], t.free[:n-1]
		} else {
			ks = &keySlot{sem: make(chan struct{}, t.limit)}
		}
		t.groups[group] = ks
	}
	ks.refs++
	return ks
}

// leave forgets one call of group's slot, and the slot with its last
// call. limiter.mu is held.
func (t *tier) leave(group string, ks *keySlot) {
	if ks == nil {
		return
	}
	ks.refs--
	if ks.refs == 0 {
		// No call holds or waits for it: its semaphore is empty.
		delete(t.groups, group)
		if len(t.free) < maxFreeSlots {
			t.free = append(t.free, ks)
		}
	}
}

// tryTake takes every slot of s if all are free at once.
func (l *limiter) tryTake(s slots) bool {
	if !tryGive(s.ks) {
		return false
	}
	if !tryGive(s.ps) {
		l.give(s.ks)
		return false
	}
	select {
	case l.global <- struct{}{}:
		return true
	default:
		l.give(s.ps)
		l.give(s.ks)
		return false
	}
}

// tryGive takes a slot of ks (nil: nothing to take) if one is free.
func tryGive(ks *keySlot) bool {
	if ks == nil {
		return true
	}
	select {
	case ks.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// give gives back a slot of ks (nil: nothing to give).
func (l *limiter) give(ks *keySlot) {
	if ks != nil {
		<-ks.sem
	}
}

// takeGroup takes a slot of ks, of tier t, waiting in t's queue if need be.
func (l *limiter) takeGroup(ctx context.Context, t *tier, ks *keySlot, bounded bool) error {
	if tryGive(ks) {
		return nil
	}
	l.mu.Lock()
	if perGroup := (l.queue + 1) / 2; bounded && ks.waiting >= perGroup {
		l.mu.Unlock()
		return retry.Errorf(retry.RateLimited, "too many calls at once: "+t.what+" and has %d more waiting, as many as one may queue (half of defaults.max_queue); wait for some to finish, then call again", t.limit, perGroup)
	}
	if bounded && t.waiting >= l.queue {
		l.mu.Unlock()
		return retry.Errorf(retry.RateLimited, "too many calls at once: "+t.what+", and %d calls of %s at their limit already wait (defaults.max_queue); wait for some to finish, then call again", t.limit, l.queue, t.others)
	}
	ks.waiting++
	t.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		ks.waiting--
		t.waiting--
		l.mu.Unlock()
	}()
	select {
	case ks.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeGlobal takes a global slot, waiting in the global queue if need be.
func (l *limiter) takeGlobal(ctx context.Context, bounded bool) error {
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

// release gives back the slots acquire took, and forgets them.
func (l *limiter) release(s slots) {
	l.giveAll(s)
	l.drop(s)
}

// giveAll gives back s's slots, keeping s's place in its groups.
func (l *limiter) giveAll(s slots) {
	<-l.global
	l.give(s.ps)
	l.give(s.ks)
}

// drop forgets one call of s's groups.
func (l *limiter) drop(s slots) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys.leave(s.key, s.ks)
	l.princ.leave(s.principal, s.ps)
}

// queued returns how many calls wait for a global slot (at most
// max_queue); calls waiting for their session's or principal's slot are
// not counted.
func (l *limiter) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// queuedAll returns how many calls wait for a slot, global, their
// principal's or their key's (at most 3 × max_queue).
func (l *limiter) queuedAll() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting + l.keys.waiting + l.princ.waiting
}

// queuedForKeys returns how many calls wait for their key's or their
// principal's slot.
func (l *limiter) queuedForKeys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys.waiting + l.princ.waiting
}

// hold is a running call's hold on its slots, which it may give back
// while it waits for its client ([callslot.Holder]).
type hold struct {
	l *limiter
	s slots

	mu     sync.Mutex // guards parked, held and ended; held across resume's wait
	parked int        // Park calls not yet resumed
	held   bool       // the call holds its slots
	ended  bool       // the call is over: a late resume takes nothing
}

// Park gives the call's slots back until the last resume takes them again.
func (h *hold) Park() func(ctx context.Context) error {
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
func (h *hold) resume(ctx context.Context) error {
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

// end gives back what the call still holds and forgets it.
func (h *hold) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.l.giveAll(h.s)
		h.held = false
	}
	h.ended = true
	h.l.drop(h.s)
}
