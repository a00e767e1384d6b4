// Package sessionlimit counts live client sessions under two caps: all of
// them (server.max_sessions) and each authenticated principal's
// (auth.max_sessions). A request that may create a session reserves room
// first ([Limits.Reserve]), so concurrent requests cannot overshoot a cap;
// the session it creates takes the room ([Slot.Take]), and a request that
// created none gives it back ([Slot.Release]).
package sessionlimit

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Limits are the caps and the counts. Build them with [New]; they are safe
// for concurrent use.
type Limits struct {
	max          int
	perPrincipal atomic.Int64 // 0: principals are not counted
	live         atomic.Int64 // live sessions plus slots reserved for new ones
	principals   sync.Map     // principal name → *Count, of principals with sessions
}

// New returns limits of max sessions in all and perPrincipal per
// principal; 0 sets no cap.
func New(max, perPrincipal int) *Limits {
	l := &Limits{max: max}
	l.perPrincipal.Store(int64(perPrincipal))
	return l
}

// PerPrincipal returns the cap of one principal's sessions; 0 for none.
func (l *Limits) PerPrincipal() int { return int(l.perPrincipal.Load()) }

// SetPerPrincipal changes the cap of one principal's sessions (a
// configuration reload) to n, at least 1: reservations from now on are
// checked against it; a principal over a lowered cap keeps its sessions
// and may open new ones once it is under it again. Limits built with no
// per-principal cap count no principal, and keep none.
func (l *Limits) SetPerPrincipal(n int) {
	if n < 1 || l.perPrincipal.Load() == 0 {
		return
	}
	l.perPrincipal.Store(int64(n))
}

// ErrPrincipalFull and ErrFull say which cap refused a reservation.
var (
	ErrPrincipalFull = errors.New("the principal has as many sessions as it may")
	ErrFull          = errors.New("the gateway has as many sessions as it may")
)

// Count is the number of one principal's sessions (and slots reserved for
// new ones). A count that drops to zero is dead and leaves the map, so the
// map holds only principals with sessions, however many have come and
// gone; a reservation that finds a dead count takes a new one.
type Count struct {
	name string
	mu   sync.Mutex
	n    int  // guarded by mu
	dead bool // guarded by mu
}

// A Slot is the room for one session, reserved by a request that may
// create one.
type Slot struct {
	l     *Limits
	used  atomic.Bool
	owner *Count // nil when principals are not capped
}

// Reserve takes room for one session of principal (a name; "" for none,
// which only the overall cap counts), or says which cap refused.
func (l *Limits) Reserve(principal string) (*Slot, error) {
	var owner *Count
	if limit := l.perPrincipal.Load(); principal != "" && limit > 0 {
		if owner = l.join(principal, int(limit)); owner == nil {
			return nil, ErrPrincipalFull
		}
	}
	if !tryAdd(&l.live, int64(l.max)) {
		l.Leave(owner)
		return nil, ErrFull
	}
	return &Slot{l: l, owner: owner}, nil
}

// Take hands the slot's room to the session that was made while serving
// its request, and returns the principal's count it is in (nil when not
// counted); ok is false when the slot was taken or released already.
func (s *Slot) Take() (owner *Count, ok bool) {
	if !s.used.CompareAndSwap(false, true) {
		return nil, false
	}
	return s.owner, true
}

// Release gives the room back if no session took it.
func (s *Slot) Release() {
	if s.used.CompareAndSwap(false, true) {
		s.l.live.Add(-1)
		s.l.Leave(s.owner)
	}
}

// Add counts a session that no reservation made room for (stdio's), past
// the caps.
func (l *Limits) Add() { l.live.Add(1) }

// Ended uncounts a session that ended, and the principal's count it was in
// (nil: none).
func (l *Limits) Ended(owner *Count) {
	l.live.Add(-1)
	l.Leave(owner)
}

// Live is the number of live sessions plus the slots reserved for new ones.
func (l *Limits) Live() int64 { return l.live.Load() }

// Principals is the number of principals with sessions (or slots).
func (l *Limits) Principals() int {
	n := 0
	l.principals.Range(func(any, any) bool { n++; return true })
	return n
}

// join adds one to name's count of sessions unless it has limit, and
// returns the count, or nil when the principal is at its cap.
func (l *Limits) join(name string, limit int) *Count {
	for {
		v, _ := l.principals.LoadOrStore(name, &Count{name: name})
		pc := v.(*Count)
		pc.mu.Lock()
		switch {
		case pc.dead: // left the map just now: take a new one
			pc.mu.Unlock()
			continue
		case pc.n >= limit:
			pc.mu.Unlock()
			return nil
		}
		pc.n++
		pc.mu.Unlock()
		return pc
	}
}

// Leave takes one off pc (nil: not counted), forgetting the principal at
// zero.
func (l *Limits) Leave(pc *Count) {
	if pc == nil {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.n--; pc.n == 0 {
		pc.dead = true
		l.principals.CompareAndDelete(pc.name, pc)
	}
}

// tryAdd adds one to n unless that would take it past limit (0: no
// limit), and reports whether it did.
func tryAdd(n *atomic.Int64, limit int64) bool {
	for {
		v := n.Load()
		if limit > 0 && v >= limit {
			return false
		}
		if n.CompareAndSwap(v, v+1) {
			return true
		}
	}
}
