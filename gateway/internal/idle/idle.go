// Package idle is the idle expiry of streamable HTTP sessions: an
// [Activity] brackets a session's requests and tells a sweeper whether it
// may end the session, with no race against a request that begins at
// that moment; a [Sweeper] looks for idle sessions at an interval.
package idle

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// claimed is the active count of an Activity the sweeper has claimed.
const claimed = math.MinInt32

// Activity is what one session has in flight and when the last of it
// ended. The zero value has never been used: call Touch when the session
// starts.
type Activity struct {
	active atomic.Int32
	last   atomic.Int64 // Unix ns
}

// Touch marks now as the session's last activity.
func (a *Activity) Touch() { a.last.Store(time.Now().UnixNano()) }

// Last is when the session's last request ended (or it started).
func (a *Activity) Last() time.Time { return time.Unix(0, a.last.Load()) }

// Begin and Finish bracket a request of the session. Begin reports false,
// and the request must not run in the session, when the sweeper has
// claimed it.
func (a *Activity) Begin() bool {
	for {
		n := a.active.Load()
		if n < 0 {
			return false
		}
		if a.active.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Finish ends a request Begin let run.
func (a *Activity) Finish() {
	a.Touch()
	a.active.Add(-1)
}

// Claim reports whether the session has been idle for ttl at now (no
// request in flight, none ended within ttl) and, if so, claims it for the
// sweeper: from then on Begin refuses.
func (a *Activity) Claim(now time.Time, ttl time.Duration) bool {
	last := a.last.Load()
	if now.Sub(time.Unix(0, last)) < ttl || !a.active.CompareAndSwap(0, claimed) {
		return false
	}
	if a.last.Load() != last { // a request began and ended meanwhile
		a.active.Store(0)
		return false
	}
	return true
}

// Interval is how often a Sweeper for ttl looks: a session lives at most
// a quarter of ttl past it.
func Interval(ttl time.Duration) time.Duration {
	return max(ttl/4, time.Second)
}

// Sweeper calls a sweep function every Interval(ttl) until Close.
type Sweeper struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Start starts calling sweep every Interval(ttl), with a ctx that ends
// at Close and the time of the tick.
func Start(ttl time.Duration, sweep func(ctx context.Context, now time.Time)) *Sweeper {
	ctx, stop := context.WithCancel(context.Background())
	sw := &Sweeper{stop: stop}
	sw.wg.Go(func() {
		t := time.NewTicker(Interval(ttl))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				sweep(ctx, now)
			}
		}
	})
	return sw
}

// Close stops the sweeper and waits for a sweep in progress; a nil
// Sweeper does nothing.
func (sw *Sweeper) Close() {
	if sw != nil {
		sw.stop()
		sw.wg.Wait()
	}
}
