// Package inflight counts a gateway's calls in flight so that shutdown
// can refuse new ones, wait for those running and, when the grace runs
// out, cancel them. It knows contexts, not calls.
package inflight

import (
	"context"
	"sync"
)

// Tracker counts calls in flight so that shutdown can wait for them, and
// holds their cancel functions so that it can stop them. Its zero value is
// ready to use.
type Tracker struct {
	mu       sync.Mutex
	next     uint64                             // last call id; guarded by mu
	calls    map[uint64]context.CancelCauseFunc // calls in flight; guarded by mu
	stopping chan struct{}                      // closed when draining starts (no new calls); guarded by mu, made lazily
	zero     chan struct{}                      // closed when calls empties while draining; guarded by mu
}

// stoppingLocked returns the stopping channel, making it if needed.
func (t *Tracker) stoppingLocked() chan struct{} {
	if t.stopping == nil {
		t.stopping = make(chan struct{})
	}
	return t.stopping
}

func (t *Tracker) drainingLocked() bool {
	select {
	case <-t.stoppingLocked():
		return true
	default:
		return false
	}
}

// Enter records a call whose context cancel cancels; ok is false when
// draining has started and the call must be refused.
func (t *Tracker) Enter(cancel context.CancelCauseFunc) (id uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.drainingLocked() {
		return 0, false
	}
	if t.calls == nil {
		t.calls = map[uint64]context.CancelCauseFunc{}
	}
	t.next++
	t.calls[t.next] = cancel
	return t.next, true
}

// Leave forgets call id, which Enter recorded.
func (t *Tracker) Leave(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, id)
	if len(t.calls) == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

// Count is the number of calls in flight.
func (t *Tracker) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// CancelAll cancels every call in flight with cause.
func (t *Tracker) CancelAll(cause error) {
	t.mu.Lock()
	cancels := make([]context.CancelCauseFunc, 0, len(t.calls))
	for _, c := range t.calls {
		cancels = append(cancels, c)
	}
	t.mu.Unlock()
	for _, c := range cancels {
		c(cause)
	}
}

// IsDraining reports whether draining has started.
func (t *Tracker) IsDraining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.drainingLocked()
}

// Draining returns a channel closed once draining has started.
func (t *Tracker) Draining() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stoppingLocked()
}

// StartDraining refuses new calls from now on, without waiting.
func (t *Tracker) StartDraining() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.drainingLocked() {
		close(t.stopping)
	}
}

// Drain refuses new calls and waits until none is in flight or ctx is done.
func (t *Tracker) Drain(ctx context.Context) error {
	t.mu.Lock()
	if !t.drainingLocked() {
		close(t.stopping)
	}
	if len(t.calls) == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	ch := t.zero
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
