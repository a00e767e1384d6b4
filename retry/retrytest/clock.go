package retrytest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when the test calls [Clock.Advance].
// Pass its Now method where retry asks for a clock (BackendsConfig.Now,
// NewBreaker's now). A Clock is safe for concurrent use; the zero value
// reads as the zero time, so use [NewClock].
type Clock struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

// NewClock returns a clock standing at 2026-03-01 12:00:00 UTC.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (back, when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
