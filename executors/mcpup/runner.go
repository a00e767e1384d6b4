package mcpup

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

const (
	// minBackoff and maxBackoff bound the wait before reconnecting: it
	// starts at minBackoff and doubles with every consecutive failure.
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
	// stableAfter is how long a connection must have lasted for its loss
	// to restart the backoff from minBackoff; an upstream that dies sooner
	// keeps backing off, so a crash loop does not spin.
	stableAfter = 30 * time.Second
	// reconnectMargin is the least an "unavailable" error of a restarting
	// upstream adds to the wait until the next connection attempt, as its
	// RetryAfter: the time a restart takes to start and initialize when no
	// connection has been measured yet, and a margin past the measured one.
	reconnectMargin = 250 * time.Millisecond
	// maxDialEstimate caps the measured connection time used in RetryAfter,
	// so that one slow start does not push retries past every deadline.
	maxDialEstimate = 10 * time.Second
)

// backoff returns the wait before connection attempt number attempt+1
// after attempt consecutive failures (attempt >= 1).
func backoff(attempt int) time.Duration {
	d := minBackoff
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// runner supervises the connection of one upstream (or of one thread's
// instance of it): it dials, serves until the connection dies, and dials
// again with backoff, until its context ends.
type runner struct {
	// Fixed at creation.
	name   string // upstream name, for logs
	thread string // thread label, for logs; "" when shared
	logger *slog.Logger
	report bool // calls state (shared upstreams and probes)
	probe  bool // lists the tools once, then closes the connection and stops
	// dial opens a connection that lives until it is closed or lifetime ends.
	dial func(lifetime context.Context) (*conn, error)
	// list, when not nil, imports the connection's tools; it is called on
	// connect and on every list_changed.
	list func(ctx context.Context, c *conn) error
	// catalog, when not nil, lists the connection's resources and prompts;
	// it is called on connect and on their list_changed.
	catalog func(ctx context.Context, c *conn) error
	state   func(up bool) // reports a state change (only when report)
	restart func()        // called before every attempt but the first
	// onRelist, when not nil, is told of each list_changed the
	// connection gets: listed again, or coalesced (pace.go).
	onRelist func(listed bool)

	// mu guards cur, up, reported and everUp. It is never held across a
	// callback or I/O.
	mu       sync.Mutex
	cur      *conn         // the live connection; nil while down
	nextDial time.Time     // when the next connection attempt starts; zero while one is under way or up
	dialing  time.Time     // when the connection attempt under way started; zero when none is
	dialTook time.Duration // how long the last successful connection attempt took; 0 before one
	up       bool          // last state reported
	reported bool          // a state has been reported
	everUp   bool          // a connection has been up
}

// run supervises until ctx ends, starting from c when not nil (an instance
// whose first connection its creator dialled). It closes every connection
// it had before returning.
func (r *runner) run(ctx context.Context, c *conn) {
	attempt := 0      // consecutive failures and early losses
	tried := c != nil // an attempt has been made
	for {
		if c == nil {
			if tried {
				wait := backoff(attempt)
				r.setNextDial(time.Now().Add(wait))
				if !sleep(ctx, wait) {
					return
				}
				r.setNextDial(time.Time{})
				r.restart()
			}
			tried = true
			var err error
			r.startDial()
			c, err = r.dial(ctx)
			r.endDial(err == nil)
			if ctx.Err() != nil {
				if c != nil {
					c.close()
				}
				return
			}
			if err != nil {
				attempt++
				r.logger.Warn("upstream connection failed", r.attrs("attempt", attempt, "retry_in", backoff(attempt), "error", err)...)
				r.setState(false)
				continue
			}
		}
		upSince := time.Now()
		if done, ok := r.serve(ctx, c); done {
			return
		} else if !ok { // a probe failed to list
			attempt++
			r.setState(false)
			c = nil
			continue
		}
		if time.Since(upSince) >= stableAfter {
			attempt = 1
		} else {
			attempt++
		}
		r.logger.Warn("upstream connection lost", r.attrs("reason", c.lostReason(), "retry_in", backoff(attempt))...)
		r.setState(false)
		c = nil
	}
}

// serve makes c the live connection and serves it until it dies (returns
// ok) or ctx ends (returns done); a probe returns done after listing, or
// !ok if listing failed. c is closed when serve returns.
func (r *runner) serve(ctx context.Context, c *conn) (done, ok bool) {
	defer c.close()
	if r.probe {
		if err := r.list(ctx, c); err != nil {
			if ctx.Err() != nil {
				return true, false
			}
			r.logger.Warn("listing upstream tools failed", r.attrs("error", err)...)
			return false, false
		}
		r.markUp(nil)
		r.setState(true)
		return true, true
	}
	r.markUp(c)
	defer r.markDown(c)
	// Listings again on list_changed are paced (pace.go).
	var tools, catalog pace
	tools.run(func() { r.listTools(ctx, c) })
	catalog.run(func() { r.listCatalog(ctx, c) })
	r.setState(true)
	for {
		select {
		case <-ctx.Done():
			return true, true
		case <-c.dead:
			return false, true
		case <-c.catalogChanged:
			if !r.paced(ctx, c, &catalog, c.catalogChanged) {
				return ctx.Err() != nil, true
			}
			r.relisted(true)
			catalog.run(func() { r.listCatalog(ctx, c) })
		case <-c.listChanged:
			if r.list == nil {
				continue
			}
			if !r.paced(ctx, c, &tools, c.listChanged) {
				return ctx.Err() != nil, true
			}
			r.relisted(true)
			tools.run(func() { r.listTools(ctx, c) })
		}
	}
}

// listTools imports c's tools, when r imports tools.
func (r *runner) listTools(ctx context.Context, c *conn) {
	if r.list == nil {
		return
	}
	if err := r.list(ctx, c); err != nil && !c.isDead() && ctx.Err() == nil {
		r.logger.Warn("listing upstream tools failed", r.attrs("error", err)...)
	}
}

// listCatalog lists c's resources and prompts, when r has a catalog.
func (r *runner) listCatalog(ctx context.Context, c *conn) {
	if r.catalog == nil {
		return
	}
	if err := r.catalog(ctx, c); err != nil && !c.isDead() && ctx.Err() == nil {
		r.logger.Warn("listing upstream resources and prompts failed", r.attrs("error", err)...)
	}
}

func (r *runner) attrs(kv ...any) []any {
	a := []any{"upstream", r.name}
	if r.thread != "" {
		a = append(a, "thread", r.thread)
	}
	return append(a, kv...)
}

func (r *runner) markUp(c *conn) {
	r.mu.Lock()
	r.cur = c
	r.everUp = true
	r.mu.Unlock()
}

func (r *runner) markDown(c *conn) {
	r.mu.Lock()
	if r.cur == c {
		r.cur = nil
	}
	r.mu.Unlock()
}

// setState reports up when it differs from the last report (or is the
// first).
func (r *runner) setState(up bool) {
	if !r.report {
		return
	}
	r.mu.Lock()
	changed := !r.reported || r.up != up
	r.up, r.reported = up, true
	r.mu.Unlock()
	if changed && r.state != nil {
		r.state(up)
	}
}

// current returns the live connection, or nil while there is none.
func (r *runner) current() *conn {
	r.mu.Lock()
	c := r.cur
	r.mu.Unlock()
	if c == nil || c.isDead() {
		return nil
	}
	return c
}

// isUp reports the last state reported.
func (r *runner) isUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up
}

// wasUp reports whether a connection has ever been up.
func (r *runner) wasUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.everUp
}

func (r *runner) setNextDial(t time.Time) {
	r.mu.Lock()
	r.nextDial = t
	r.mu.Unlock()
}

func (r *runner) startDial() {
	r.mu.Lock()
	r.dialing = time.Now()
	r.mu.Unlock()
}

// endDial ends the attempt startDial began, measuring it when it connected.
func (r *runner) endDial(ok bool) {
	r.mu.Lock()
	if ok {
		r.dialTook = min(time.Since(r.dialing), maxDialEstimate)
	}
	r.dialing = time.Time{}
	r.mu.Unlock()
}

// reconnectIn estimates how long until the upstream may be back: the time
// to the next connection attempt, plus what the last successful attempt
// took (the rest of it while an attempt is under way), plus
// reconnectMargin.
func (r *runner) reconnectIn() time.Duration {
	r.mu.Lock()
	next, dialing, took := r.nextDial, r.dialing, r.dialTook
	r.mu.Unlock()
	switch {
	case !dialing.IsZero():
		return max(took-time.Since(dialing), 0) + reconnectMargin
	case !next.IsZero():
		return max(time.Until(next), 0) + took + reconnectMargin
	}
	return reconnectMargin
}

// sleep waits for d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
