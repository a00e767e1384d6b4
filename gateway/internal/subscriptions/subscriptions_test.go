package subscriptions

import (
	"context"
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
		s := New(src.tell, time.Minute)
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
		go func() { s.Subscribed(ctx, "A", uri, true); close(done) }()
		want("subscribe started")
		src.release <- struct{}{}
		<-done
		if got := s.Sessions(uri); !slices.Equal(got, []string{"A"}) {
			t.Fatalf("Sessions = %q, want A", got)
		}
		s.Forget("A") // returns at once
		want("subscribe started", "subscribe done", "unsubscribe started")
		done = make(chan struct{})
		go func() { s.Subscribed(ctx, "B", uri, true); close(done) }()
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
