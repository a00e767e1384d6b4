// Package subscriptions keeps which client sessions subscribed to which
// resource URIs (resources/subscribe), and tells each URI's source: to
// subscribe when the first session does, to unsubscribe when the last one
// goes. Telling a source is serialised per URI, and each teller decides
// what to tell only once the one before it is done: whatever the order in
// which sessions come and go, the last thing a source hears matches
// whether any session still wants the URI.
package subscriptions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Tell subscribes the source serving uri to it (on) or unsubscribes it,
// within ctx, and reports whether that worked (a source that takes no
// subscriptions: true).
type Tell func(ctx context.Context, uri string, on bool) bool

// Set is the subscriptions of a front's sessions. Build it with [New]; it
// is safe for concurrent use; [Set.Close] stops its background work.
type Set struct {
	tell    Tell
	timeout time.Duration // bounds each unsubscribe of a session that ended
	root    context.Context
	stop    context.CancelFunc

	// mu guards subs, pending and draining, and the fields of each
	// subscription it marks. It is never held while a source is told.
	mu       sync.Mutex
	subs     map[string]*subscription // URI → its sessions and what its source was told
	held     map[string]*holder       // session → its principal and how many URIs it holds
	perPrin  map[string]int           // principal → URIs its sessions hold
	limits   Limits
	pending  map[string]bool // URIs whose last session ended, for drain
	draining bool            // drain runs
	drainer  sync.WaitGroup  // drain; Close waits for it
}

// Limits bound the subscriptions one session and one principal may hold,
// and the length of a URI subscribed to.
type Limits struct {
	PerSession, PerPrincipal, URILen int
}

// holder is what the set counts of one session.
type holder struct {
	principal string
	n         int
}

// LimitError refuses a subscription past a [Limits] bound.
type LimitError struct {
	What string // "session", "principal" or "uri"
	Max  int
}

func (e *LimitError) Error() string {
	if e.What == "uri" {
		return fmt.Sprintf("the resource URI is too long: toolgate takes subscriptions to URIs of at most %d bytes", e.Max)
	}
	return fmt.Sprintf("this %s holds %d resource subscriptions, the most it may: unsubscribe from resources no longer needed first", e.What, e.Max)
}

// ErrNotServed refuses a subscription to a URI no source serves: nothing
// would ever update it.
var ErrNotServed = errors.New("no source serves this resource: subscribe to a URI that resources/list or a resource template gives")

// subscription is one URI's subscribed sessions and what its source was
// told.
type subscription struct {
	send chan struct{} // 1-buffered: held while the source is told about the URI

	// Guarded by Set.mu.
	sessions map[string]bool // subscribed session IDs
	told     bool            // the source was last told to subscribe, and did not fail
	users    int             // goroutines holding or waiting for send
}

// New returns an empty set that tells sources through tell; an unsubscribe
// of a session that ended is bounded by timeout.
func New(tell Tell, timeout time.Duration, limits Limits) *Set {
	s := &Set{tell: tell, timeout: timeout, subs: map[string]*subscription{}, held: map[string]*holder{}, perPrin: map[string]int{}, limits: limits}
	s.root, s.stop = context.WithCancel(context.Background())
	return s
}

// subLocked returns uri's subscription, made if there is none. s.mu is
// held.
func (s *Set) subLocked(uri string) *subscription {
	sub := s.subs[uri]
	if sub == nil {
		sub = &subscription{send: make(chan struct{}, 1), sessions: map[string]bool{}}
		s.subs[uri] = sub
	}
	return sub
}

// Admit records that session, of principal, subscribes to uri, unless
// uri is not served (ErrNotServed) or too long, or that would take the
// session or the principal past its limit (a *LimitError); the source is
// told when the subscription is confirmed ([Set.Subscribed]). A URI the
// session holds already is admitted again.
func (s *Set) Admit(session, principal, uri string, served bool) error {
	switch {
	case len(uri) > s.limits.URILen:
		return &LimitError{"uri", s.limits.URILen}
	case !served:
		return ErrNotServed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.subs[uri]; sub != nil && sub.sessions[session] {
		return nil
	}
	if h := s.held[session]; h != nil && h.n >= s.limits.PerSession {
		return &LimitError{"session", s.limits.PerSession}
	}
	if s.perPrin[principal] >= s.limits.PerPrincipal {
		return &LimitError{"principal", s.limits.PerPrincipal}
	}
	s.recordLocked(session, principal, uri)
	return nil
}

// recordLocked adds session's subscription to uri, counted. s.mu is held.
func (s *Set) recordLocked(session, principal, uri string) {
	sub := s.subLocked(uri)
	if sub.sessions[session] {
		return
	}
	sub.sessions[session] = true
	h := s.held[session]
	if h == nil {
		h = &holder{principal: principal}
		s.held[session] = h
	}
	h.n++
	s.perPrin[h.principal]++
}

// dropLocked removes session's subscription to uri, counted. s.mu is held.
func (s *Set) dropLocked(session string, sub *subscription) {
	if !sub.sessions[session] {
		return
	}
	delete(sub.sessions, session)
	h := s.held[session]
	if h.n--; h.n == 0 {
		delete(s.held, session)
	}
	if s.perPrin[h.principal]--; s.perPrin[h.principal] == 0 {
		delete(s.perPrin, h.principal)
	}
}

// Subscribed records that session, of principal, subscribed to uri (on)
// or unsubscribed, and tells the source serving uri, before it returns,
// when that changes whether any session wants it.
func (s *Set) Subscribed(ctx context.Context, session, principal, uri string, on bool) {
	s.mu.Lock()
	sub := s.subLocked(uri)
	if on {
		s.recordLocked(session, principal, uri)
	} else {
		s.dropLocked(session, sub)
	}
	s.mu.Unlock()
	s.sync(ctx, uri)
}

// sync tells the source serving uri to subscribe or to unsubscribe if what
// it was last told differs from whether any session wants uri now, after
// every earlier sync of uri has ended. It waits for those, each bounded by
// its own context.
func (s *Set) sync(ctx context.Context, uri string) {
	s.mu.Lock()
	sub := s.subLocked(uri)
	sub.users++
	s.mu.Unlock()

	sub.send <- struct{}{}
	s.mu.Lock()
	want := len(sub.sessions) > 0
	tell := want != sub.told
	s.mu.Unlock()
	if tell {
		ok := s.tell(ctx, uri, want)
		s.mu.Lock()
		sub.told = want && ok // a failed unsubscribe counts as done: nobody wants the updates
		s.mu.Unlock()
	}
	<-sub.send

	s.mu.Lock()
	if sub.users--; sub.users == 0 && len(sub.sessions) == 0 && !sub.told {
		delete(s.subs, uri)
	}
	s.mu.Unlock()
}

// Forget drops the subscriptions of a session that ended. A resource the
// session was the last one subscribed to is unsubscribed at its source, as
// if the session had unsubscribed before it ended, but in the background
// (drain), so that whoever ends sessions never waits for a slow source;
// not once the set is closed, since its sources are going too.
func (s *Set) Forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := false
	for uri, sub := range s.subs {
		if !sub.sessions[session] {
			continue
		}
		s.dropLocked(session, sub)
		if len(sub.sessions) == 0 && s.root.Err() == nil {
			if s.pending == nil {
				s.pending = map[string]bool{}
			}
			s.pending[uri] = true
			start, s.draining = start || !s.draining, true
		}
	}
	if start {
		// At most one runs; it ends when nothing is pending or the set
		// closes, each source call bounded by s.timeout. Started under mu,
		// which Close takes after ending s.root and before it waits: a
		// drainer is either counted before that wait or never started.
		s.drainer.Go(s.drain)
	}
}

// drain brings the sources of the pending URIs up to date (sync), one URI
// at a time in URI order, until none is pending or the set closes.
func (s *Set) drain() {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 || s.root.Err() != nil {
			s.pending, s.draining = nil, false
			s.mu.Unlock()
			return
		}
		uri := slices.Min(slices.Collect(maps.Keys(s.pending)))
		delete(s.pending, uri)
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.root, s.timeout)
		s.sync(ctx, uri)
		cancel()
	}
}

// Sessions returns the sessions subscribed to uri.
func (s *Set) Sessions(uri string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.subs[uri]; sub != nil {
		return slices.Collect(maps.Keys(sub.sessions))
	}
	return nil
}

// Close stops the background unsubscribes and waits for the one running.
func (s *Set) Close() {
	s.stop()
	s.mu.Lock()
	s.mu.Unlock() //nolint:staticcheck // SA2001: an empty section, a barrier (see Forget)
	s.drainer.Wait()
}
