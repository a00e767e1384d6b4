// Package reload decides when a running toolgate reloads its
// configuration: on request (SIGHUP) and when a watched file changes,
// debounced, one reload at a time with at most one more queued however
// many requests arrive (issue 27, "reload storms"). What a reload does is
// the caller's function; this package knows nothing of configurations.
// It imports only the standard library and fsnotify.
package reload

import (
	"context"
	"time"
)

// Queue runs a reload function one call at a time: a request while none
// runs starts one, a request while one runs queues one more, and further
// requests while one is queued are merged into it. Its methods are safe
// for concurrent use.
type Queue struct {
	kick chan struct{} // holds the one queued request
}

// NewQueue returns an empty queue; [Queue.Run] serves it.
func NewQueue() *Queue { return &Queue{kick: make(chan struct{}, 1)} }

// Request asks for a reload and returns at once.
func (q *Queue) Request() {
	select {
	case q.kick <- struct{}{}:
	default: // one is queued already: it will see this change too
	}
}

// Run calls fn once for each queued request, one at a time, until ctx is
// done; a reload that has begun finishes first.
func (q *Queue) Run(ctx context.Context, fn func(context.Context)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
			fn(ctx)
		}
	}
}

// Debounce calls fire once changes stop arriving on changes for quiet, or
// once changes have kept arriving for most since the first one not yet
// fired (so that a file touched without pause still reloads), until ctx
// is done. An editor writes a file in several steps; firing after the
// last keeps a reload from reading it half written.
func Debounce(ctx context.Context, changes <-chan struct{}, quiet, most time.Duration, fire func()) {
	var timer <-chan time.Time
	var t *time.Timer
	var first time.Time // of the changes not yet fired; zero when none
	stop := func() {
		if t != nil {
			t.Stop()
		}
	}
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			wait := min(quiet, first.Add(most).Sub(now))
			stop()
			t = time.NewTimer(max(wait, 0))
			timer = t.C
		case <-timer:
			timer, first = nil, time.Time{}
			fire()
		}
	}
}
