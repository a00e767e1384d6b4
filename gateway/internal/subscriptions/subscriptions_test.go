package subscriptions

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// source is a source that logs what it is told and holds each telling
// until released.
type source struct {
	mu      sync.Mutex
	log     []string
	release chan struct{}
}

func (s *source) tell(ctx context.Context, _ string, on bool) bool {
	what := map[bool]string{true: "subscribe", false: "unsubscribe"}[on]
	s.note(what + " started")
	select {
	case <-s.release:
		s.note(what + " done")
		return true
	case <-ctx.Done():
		s.note(what + " cancelled")
		return false
	}
}

func (s *source) note(m string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, m)
}

func (s *source) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// A session that was the only subscriber ends while the source is slow,
// and another subscribes meanwhile: the end does not wait, the second
// subscribe goes out after the unsubscribe, and Close cuts a pending
// unsubscribe short.
func TestOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &source{release: make(chan struct{})}
		s := New(src.tell, time.Minute, Limits{PerSession: 10, PerPrincipal: 10, URILen: 100})
		const uri = "test://w"
		want := func(log ...string) {
			t.Helper()
			synctest.Wait()
			if got := src.got(); !slices.Equal(got, log) {
				t.Fatalf("source heard %q, want %q", got, log)
			}
		}
		ctx := t.Context()
		done := make(chan struct{})
		go func() { s.Subscribed(ctx, "A", "", uri, true); close(done) }()
		want("subscribe started")
		src.release <- struct{}{}
		<-done
		if got := s.Sessions(uri); !slices.Equal(got, []string{"A"}) {
			t.Fatalf("Sessions = %q, want A", got)
		}
		s.Forget("A") // returns at once
		want("subscribe started", "subscribe done", "unsubscribe started")
		done = make(chan struct{})
		go func() { s.Subscribed(ctx, "B", "", uri, true); close(done) }()
		want("subscribe started", "subscribe done", "unsubscribe started")
		src.release <- struct{}{}
		want("subscribe started", "subscribe done", "unsubscribe started", "unsubscribe done", "subscribe started")
		src.release <- struct{}{}
		<-done
		s.Forget("B")
		want("subscribe started", "subscribe done", "unsubscribe started", "unsubscribe done", "subscribe started", "subscribe done", "unsubscribe started")
		s.Close()
		if log := src.got(); log[len(log)-1] != "unsubscribe cancelled" {
			t.Fatalf("when Close returned the source had heard %q, want the unsubscribe ended", log)
		}
		s.Forget("C") // after Close: nothing starts
		if len(s.Sessions(uri)) != 0 {
			t.Error("a subscription outlived its sessions")
		}
	})
}

// TestLimits checks the bounds on what one session and one principal hold:
// past either, Admit refuses, naming which; a URI held already is admitted
// again; unsubscribing and a session's end free room, for that principal.
func TestLimits(t *testing.T) {
	s := New(func(context.Context, string, bool) bool { return true }, time.Minute, Limits{PerSession: 2, PerPrincipal: 3, URILen: 8})
	defer s.Close()
	admit := func(session, principal, uri string) error { return s.Admit(session, principal, uri, true) }
	for _, u := range []string{"u1", "u2", "u2"} {
		if err := admit("A", "alice", u); err != nil {
			t.Fatalf("A's %s: %v", u, err)
		}
	}
	if e, ok := errors.AsType[*LimitError](admit("A", "alice", "u3")); !ok || e.What != "session" {
		t.Errorf("A's third URI: %v; want the session's limit", e)
	}
	if err := admit("B", "alice", "u3"); err != nil {
		t.Fatalf("B's u3: %v", err)
	}
	if e, ok := errors.AsType[*LimitError](admit("B", "alice", "u4")); !ok || e.What != "principal" {
		t.Errorf("alice's fourth URI: %v; want the principal's limit", e)
	}
	if err := admit("C", "bob", "u4"); err != nil {
		t.Errorf("bob, under his own limits, refused: %v", err)
	}
	s.Subscribed(t.Context(), "A", "alice", "u1", false)
	if err := admit("B", "alice", "u4"); err != nil {
		t.Errorf("after A unsubscribed from u1, B's u4 refused: %v", err)
	}
	if e, ok := errors.AsType[*LimitError](s.Admit("C", "bob", "u-too-long", true)); !ok || e.What != "uri" {
		t.Errorf("a 10-byte URI past a bound of 8: %v", e)
	}
	if err := s.Admit("C", "bob", "u5", false); !errors.Is(err, ErrNotServed) {
		t.Errorf("a URI no source serves: %v", err)
	}
	s.Forget("A")
	s.Forget("B")
	if len(s.held) != 1 || len(s.perPrin) != 1 || s.perPrin["bob"] != 1 {
		t.Errorf("after alice's sessions ended: held %v, per principal %v; want only bob's", s.held, s.perPrin)
	}
}
