package mcpup

import (
	"context"
	"time"
)

// Listing again on list_changed, paced (issue 31, item 9): an upstream
// announcing a change over and over would otherwise keep toolgate listing
// (and registering, and telling every client) without end; a 20k-tool
// upstream announcing one a second burned 25.3 s of CPU in 21 s. The
// notifications that arrive while a listing waits for its turn are
// folded into it.

const (
	// relistGap is the least time from one listing of an upstream's tools
	// (or of its resources and prompts) to the next.
	relistGap = 2 * time.Second
	// relistCostFactor keeps the next listing at least this many times
	// the last one's duration away, so that listing costs an upstream
	// whose lists are expensive at most about 1/relistCostFactor of a
	// core.
	relistCostFactor = 5
)

// pace is when the next listing of one kind (tools, or the catalog) of
// one connection may start. It is used by the connection's supervisor
// goroutine only.
type pace struct{ next time.Time }

// run runs list and sets when the next listing may start.
func (p *pace) run(list func()) {
	start := time.Now()
	list()
	p.next = time.Now().Add(max(relistGap, relistCostFactor*time.Since(start)))
}

// paced waits until p lets the next listing of c start, folding a
// notification of changed (the kind's channel) that arrives meanwhile
// into it; false when ctx ended or c died first.
func (r *runner) paced(ctx context.Context, c *conn, p *pace, changed <-chan struct{}) bool {
	if wait := time.Until(p.next); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		case <-c.dead:
			return false
		}
	}
	select {
	case <-changed:
		r.relisted(false)
	default:
	}
	return true
}

// relisted reports a list_changed notification: listed, or coalesced
// into a listing already pending.
func (r *runner) relisted(listed bool) {
	if r.onRelist != nil {
		r.onRelist(listed)
	}
}
