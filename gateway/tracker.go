package gateway

import (
	"context"
	"sync"
)

// tracker counts calls in flight so that shutdown can wait for them, and
// holds their cancel functions so that it can stop them. Its zero value is
// ready to use.
type tracker struct {
	mu       sync.Mutex
	next     uint64                             // last call id; guarded by mu
	calls    map[uint64]context.CancelCauseFunc // calls in flight; guarded by mu
	stopping chan struct{}                      // closed when draining starts (no new calls); guarded by mu, made lazily
	zero     chan struct{}                      // closed when calls empties while draining; guarded by mu
}

// stoppingLocked returns the stopping channel, making it if needed.
func (t *tracker) stoppingLocked() chan struct{} {
	if t.stopping == nil {
		t.stopping = make(chan struct{})
	}
	return t.stopping
}

func (t *tracker) drainingLocked() bool {
	select {
	case <-t.stoppingLocked():
		return true
	default:
		return false
	}
}

// enter records a call whose context cancel cancels; ok is false when
// draining has started and the call must be refused.
func (t *tracker) enter(cancel context.CancelCauseFunc) (id uint64, ok bool) {
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

func (t *tracker) leave(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, id)
	if len(t.calls) == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// cancelAll cancels every call in flight with cause.
func (t *tracker) cancelAll(cause error) {
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

func (t *tracker) isDraining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.drainingLocked()
}

// draining returns a channel closed once draining has started.
func (t *tracker) draining() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stoppingLocked()
}

func (t *tracker) startDraining() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.drainingLocked() {
		close(t.stopping)
	}
}

// drain refuses new calls and waits until none is in flight or ctx is done.
func (t *tracker) drain(ctx context.Context) error {
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
