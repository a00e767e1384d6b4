package registry

import (
	"slices"
	"sync/atomic"
)

// Change describes one mutation of a [Registry]. A tool that was replaced
// appears in both lists. Every subscriber gets the same slices, so none
// may modify them.
type Change struct {
	// Added are the tools added, sorted by name.
	Added []*Tool
	// Removed are the names of the tools removed, sorted.
	Removed []string
}

type subscription struct {
	fn        func(Change)
	cancelled atomic.Bool
}

// pendingChange is a change waiting for delivery, with the subscriptions
// that were live when it happened.
type pendingChange struct {
	change Change
	subs   []*subscription
}

// Subscribe calls fn with every [Change] that happens after Subscribe
// returns, one at a time and in order (see the package doc for where and
// when). fn may call any method of the registry. The returned cancel
// stops further calls; a call already running on another goroutine may
// still be finishing when cancel returns. cancel may be called more than
// once and from inside fn. A nil fn is never called.
func (r *Registry) Subscribe(fn func(Change)) (cancel func()) {
	if fn == nil {
		return func() {}
	}
	s := &subscription{fn: fn}
	r.mu.Lock()
	r.subs = append(slices.Clip(r.subs), s)
	r.mu.Unlock()
	return func() {
		if s.cancelled.Swap(true) {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		subs := make([]*subscription, 0, len(r.subs))
		for _, x := range r.subs {
			if x != s {
				subs = append(subs, x)
			}
		}
		r.subs = subs
	}
}

// changed queues c for delivery; r.mu must be held.
func (r *Registry) changed(c Change) {
	if len(r.subs) == 0 {
		return
	}
	r.pending = append(r.pending, pendingChange{change: c, subs: r.subs})
}

// deliver hands pending changes to subscribers unless another goroutine is
// already doing so, in which case that goroutine will deliver them. r.mu
// must not be held.
func (r *Registry) deliver() {
	r.mu.Lock()
	if r.delivering {
		r.mu.Unlock()
		return
	}
	r.delivering = true
	for len(r.pending) > 0 {
		p := r.pending[0]
		r.pending[0] = pendingChange{}
		r.pending = r.pending[1:]
		if len(r.pending) == 0 {
			r.pending = nil
		}
		r.mu.Unlock()
		r.notify(p)
		r.mu.Lock()
	}
	r.delivering = false
	r.mu.Unlock()
}

// notify calls the subscribers of p without r.mu held. If a subscriber
// panics, the panic goes on up, but delivery is left ready for the next
// mutation.
func (r *Registry) notify(p pendingChange) {
	done := false
	defer func() {
		if !done {
			r.mu.Lock()
			r.delivering = false
			r.mu.Unlock()
		}
	}()
	for _, s := range p.subs {
		if !s.cancelled.Load() {
			s.fn(p.change)
		}
	}
	done = true
}
