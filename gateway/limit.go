package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/retry"
)

// limiter bounds the tool calls that run at once: at most global in all,
// at most perKey for one key (a session, or an explicit thread), and at
// most queue calls waiting for a global slot. A call that finds full the
// queue it has to wait in fails with class rate_limited (at once, unless
// it first waited for its key's slot). Waiting is FIFO-fair per key: slots
// are granted in arrival order (Go's channel send order).
//
// A slot is taken in two steps, the key's then the global one, so that one
// session that floods toolgate waits on its own slots and never holds
// global slots it cannot use. The two waits have separate queues: a call
// waiting for its key's slot waits for its own session, not for capacity
// that other sessions could use, so it must not take their place in the
// global queue (queue calls). Calls waiting for their key's slot are
// bounded apart: at most queue of them in all, and at most half of that
// (rounded up) for one key, so one flooding session leaves room for
// another. All told at most 2 × queue calls wait.
type limiter struct {
	global chan struct{} // a token per running call
	perKey int
	queue  int

	mu         sync.Mutex
	waiting    int                 // calls waiting for a global slot; guarded by mu
	keyWaiting int                 // calls waiting for their key's slot, all keys together; guarded by mu
	keys       map[string]*keySlot // guarded by mu
	// free are slots whose key had no call left, kept for the next new
	// key (a session's slot is dropped after each of its calls, so
	// without them every call would make one); at most maxFreeSlots.
	free []*keySlot // guarded by mu
}

// maxFreeSlots bounds limiter.free.
const maxFreeSlots = 64

// keySlot is one key's semaphore; refs counts the calls holding or
// waiting for it, so that it is dropped with the last one.
type keySlot struct {
	sem     chan struct{}
	refs    int // guarded by limiter.mu
	waiting int // calls waiting for sem; guarded by limiter.mu
}

func newLimiter(global, perKey, queue int) *limiter {
	return &limiter{global: make(chan struct{}, global), perKey: perKey, queue: queue, keys: map[string]*keySlot{}}
}

// acquire takes a slot for a call of key ("" means no per-key limit). It
// returns the key's slot, to give back with release(key, ks), and how long
// the call waited. It fails with rate_limited when the queue it would wait
// in is full, and with ctx's error (classified by the caller) when ctx
// ends while waiting.
func (l *limiter) acquire(ctx context.Context, key string) (ks *keySlot, waited time.Duration, err error) {
	l.mu.Lock()
	if key != "" {
		ks = l.keys[key]
		if ks == nil {
			if n := len(l.free); n > 0 {
				ks, l.free = l.free[n-1], l.free[:n-1]
			} else {
				ks = &keySlot{sem: make(chan struct{}, l.perKey)}
			}
			l.keys[key] = ks
		}
		ks.refs++
	}
	l.mu.Unlock()

	// The fast path: free slots at both levels, no queueing.
	if l.tryTake(ks) {
		return ks, 0, nil
	}
	start := time.Now()
	if ks != nil {
		err = l.takeKey(ctx, ks)
	}
	if err == nil {
		if err = l.takeGlobal(ctx); err != nil && ks != nil {
			<-ks.sem
		}
	}
	waited = time.Since(start)
	if err != nil {
		l.drop(key, ks)
		return nil, waited, err
	}
	return ks, waited, nil
}

// tryTake takes both slots if both are free at once.
func (l *limiter) tryTake(ks *keySlot) bool {
	if ks != nil {
		select {
		case ks.sem <- struct{}{}:
		default:
			return false
		}
	}
	select {
	case l.global <- struct{}{}:
		return true
	default:
		if ks != nil {
			<-ks.sem
		}
		return false
	}
}

// takeKey takes the key's slot, waiting in the key's queue if need be.
func (l *limiter) takeKey(ctx context.Context, ks *keySlot) error {
	select {
	case ks.sem <- struct{}{}:
		return nil
	default:
	}
	l.mu.Lock()
	if perKey := (l.queue + 1) / 2; ks.waiting >= perKey {
		l.mu.Unlock()
		return retry.Errorf(retry.RateLimited, "too many calls at once: this session already runs its limit of %d (defaults.max_parallel_per_session) and has %d more waiting, as many as one session may queue (half of defaults.max_queue); wait for some to finish, then call again", cap(ks.sem), perKey)
	}
	if l.keyWaiting >= l.queue {
		l.mu.Unlock()
		return retry.Errorf(retry.RateLimited, "too many calls at once: this session already runs its limit of %d (defaults.max_parallel_per_session), and %d calls of sessions at their limit already wait (defaults.max_queue); wait for some to finish, then call again", cap(ks.sem), l.queue)
	}
	ks.waiting++
	l.keyWaiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		ks.waiting--
		l.keyWaiting--
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
func (l *limiter) takeGlobal(ctx context.Context) error {
	select {
	case l.global <- struct{}{}:
		return nil
	default:
	}
	l.mu.Lock()
	if l.waiting >= l.queue {
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

// release gives back the slots acquire took for key.
func (l *limiter) release(key string, ks *keySlot) {
	<-l.global
	if ks != nil {
		<-ks.sem
	}
	l.drop(key, ks)
}

// drop forgets one call of key's slot, and the slot with its last call.
func (l *limiter) drop(key string, ks *keySlot) {
	if ks == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ks.refs--
	if ks.refs == 0 {
		// No call holds or waits for it: its semaphore is empty.
		delete(l.keys, key)
		if len(l.free) < maxFreeSlots {
			l.free = append(l.free, ks)
		}
	}
}

// queued returns how many calls wait for a global slot (at most
// max_queue); calls waiting for their session's slot are not counted.
func (l *limiter) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// queuedAll returns how many calls wait for a slot, global or their key's
// (at most 2 × max_queue).
func (l *limiter) queuedAll() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting + l.keyWaiting
}

// queuedForKeys returns how many calls wait for their key's slot.
func (l *limiter) queuedForKeys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keyWaiting
}
