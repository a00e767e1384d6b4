package callshare

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/callslot"
	"github.com/toolgate/toolgate/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Hold is what the pipeline puts in a call's context.
var _ callslot.Holder = (*Hold)(nil)

// acquired is the outcome of an Acquire run in a goroutine.
type acquired struct {
	h   *Hold
	err error
}

// goAcquire starts l.Acquire in a goroutine of the bubble and waits until
// it has its slots or blocks waiting for them.
func goAcquire(ctx context.Context, l *Limiter, key, principal string) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		h, _, err := l.Acquire(ctx, key, principal)
		ch <- acquired{h, err}
	}()
	synctest.Wait()
	return ch
}

func mustAcquire(t *testing.T, l *Limiter, key, principal string) *Hold {
	t.Helper()
	h, waited, err := l.Acquire(t.Context(), key, principal)
	if err != nil {
		t.Fatalf("Acquire(%q, %q) = %v, want a slot at once", key, principal, err)
	}
	if waited != 0 {
		t.Errorf("Acquire(%q, %q) waited %v with its slots free, want 0", key, principal, waited)
	}
	return h
}

// wantRateLimited checks that Acquire fails at once with rate_limited,
// its message naming each of says.
func wantRateLimited(t *testing.T, l *Limiter, key, principal string, says ...string) {
	t.Helper()
	h, _, err := l.Acquire(t.Context(), key, principal)
	if err == nil {
		h.End()
		t.Fatalf("Acquire(%q, %q) got a slot, want rate_limited", key, principal)
	}
	if retry.Classify(err) != retry.RateLimited {
		t.Errorf("Acquire(%q, %q) = %v (class %s), want rate_limited", key, principal, err, retry.Classify(err))
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Acquire(%q, %q) = %q, want it to say %q", key, principal, err, s)
		}
	}
}

func wantStats(t *testing.T, l *Limiter, want Stats) {
	t.Helper()
	if got := l.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// Each level's queue is bounded apart, and a call past a full one fails
// with rate_limited naming the setting; a waiting call gets the slot the
// call before it gives back.
func TestQueueBounds(t *testing.T) {
	t.Run("global", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := New(Limits{Global: 1, PerKey: 1, Queue: 1})
			h := mustAcquire(t, l, "", "")
			waiter := goAcquire(t.Context(), l, "", "")
			wantStats(t, l, Stats{Global: 1, Running: 1, Waiting: 1})
			wantRateLimited(t, l, "", "", "defaults.max_parallel", "defaults.max_queue")
			h.End()
			w := <-waiter
			if w.err != nil {
				t.Fatalf("the waiting call = %v, want the slot given back", w.err)
			}
			w.h.End()
			wantStats(t, l, Stats{Global: 1})
		})
	})
	t.Run("one key waits on its own slots", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := New(Limits{Global: 4, PerKey: 1, Queue: 2})
			a := mustAcquire(t, l, "a", "")
			waiter := goAcquire(t.Context(), l, "a", "")
			wantStats(t, l, Stats{Global: 4, Running: 1, WaitingForGroups: 1})
			// Half of the queue (1) waits on a already.
			wantRateLimited(t, l, "a", "", "defaults.max_parallel_per_session", "half of defaults.max_queue")
			b := mustAcquire(t, l, "b", "")
			b.End()
			a.End()
			w := <-waiter
			if w.err != nil {
				t.Fatal(w.err)
			}
			w.h.End()
			wantStats(t, l, Stats{Global: 4})
		})
	})
	t.Run("the principals' queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := New(Limits{Global: 8, PerKey: 8, PerPrincipal: 1, Queue: 2})
			var held []*Hold
			var waiters []<-chan acquired
			for _, p := range []string{"alice", "bob"} {
				held = append(held, mustAcquire(t, l, "", p))
				waiters = append(waiters, goAcquire(t.Context(), l, "", p))
			}
			held = append(held, mustAcquire(t, l, "", "carol"))
			wantRateLimited(t, l, "", "carol", "defaults.max_parallel_per_principal", "2 calls of principals at their limit already wait")
			for _, h := range held {
				h.End()
			}
			for _, w := range waiters {
				r := <-w
				if r.err != nil {
					t.Fatal(r.err)
				}
				r.h.End()
			}
			wantStats(t, l, Stats{Global: 8})
		})
	})
}

// A principal's share of 0 is half of Global, rounded up.
func TestDefaultShare(t *testing.T) {
	l := New(Limits{Global: 3, PerKey: 3})
	a, b := mustAcquire(t, l, "", "p"), mustAcquire(t, l, "", "p")
	wantRateLimited(t, l, "", "p", "its share of 2")
	c := mustAcquire(t, l, "", "q")
	for _, h := range []*Hold{a, b, c} {
		h.End()
	}
}

// A call whose ctx ends while it waits fails with ctx's error and leaves
// nothing behind: no waiter, no slot, no group.
func TestCancelledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Limits{Global: 1, PerKey: 1, PerPrincipal: 1, Queue: 4})
		h := mustAcquire(t, l, "k", "p")
		ctx, cancel := context.WithCancel(t.Context())
		onKey := goAcquire(ctx, l, "k", "p")
		onGlobal := goAcquire(ctx, l, "other", "q")
		wantStats(t, l, Stats{Global: 1, Running: 1, Waiting: 1, WaitingForGroups: 1})
		cancel()
		for _, ch := range []<-chan acquired{onKey, onGlobal} {
			if r := <-ch; !errors.Is(r.err, context.Canceled) || r.h != nil {
				t.Errorf("a cancelled waiting call = %v, %v; want context.Canceled and no hold", r.h, r.err)
			}
		}
		h.End()
		wantStats(t, l, Stats{Global: 1})
		if len(l.keys.groups) != 0 || len(l.princ.groups) != 0 {
			t.Errorf("%d keys and %d principals left after every call, want none", len(l.keys.groups), len(l.princ.groups))
		}
	})
}

// A parked call holds no slot; the last of nested Parks takes them again,
// waiting past the queue bounds (max_queue 0 here); a resume after End
// takes nothing.
func TestPark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Limits{Global: 1, PerKey: 1, PerPrincipal: 1, Queue: 0})
		h := mustAcquire(t, l, "k", "p")
		outer := h.Park()
		inner := h.Park()
		wantStats(t, l, Stats{Global: 1})
		other := mustAcquire(t, l, "k", "p") // the parked call's slots serve another
		if err := inner(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantStats(t, l, Stats{Global: 1, Running: 1}) // not the last resume: nothing taken
		done := make(chan error, 1)
		go func() { done <- outer(t.Context()) }()
		synctest.Wait()
		wantStats(t, l, Stats{Global: 1, Running: 1, WaitingForGroups: 1})
		other.End()
		if err := <-done; err != nil {
			t.Fatalf("resume = %v, want the slots back", err)
		}
		wantStats(t, l, Stats{Global: 1, Running: 1})
		if err := outer(t.Context()); err != nil {
			t.Errorf("a second call of one resume = %v, want nil (once)", err)
		}
		late := h.Park()
		h.End()
		if err := late(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantStats(t, l, Stats{Global: 1})
	})
}

// A resume whose ctx ends first fails with ctx's error and holds nothing:
// End then gives nothing back.
func TestResumeCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Limits{Global: 1, PerKey: 1, Queue: 1})
		h := mustAcquire(t, l, "", "")
		resume := h.Park()
		other := mustAcquire(t, l, "", "")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- resume(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("resume with ctx cancelled = %v, want context.Canceled", err)
		}
		h.End()
		wantStats(t, l, Stats{Global: 1, Running: 1}) // other's slot only
		other.End()
		wantStats(t, l, Stats{Global: 1})
	})
}

// A key's slot dropped with its last call serves the next new key, empty
// and with the whole per-key bound; at most maxFreeSlots are kept.
func TestReusesSlots(t *testing.T) {
	l := New(Limits{Global: 100, PerKey: 2, PerPrincipal: 100, Queue: 10})
	a := mustAcquire(t, l, "a", "")
	a.End()
	b1 := mustAcquire(t, l, "b", "")
	if b1.s.ks != a.s.ks {
		t.Error("a new key made a slot while a dropped one was free")
	}
	b2 := mustAcquire(t, l, "b", "")
	select {
	case b1.s.ks.sem <- struct{}{}:
		t.Error("the reused slot takes a third call of its key; the bound is 2")
	default:
	}
	b1.End()
	b2.End()

	var held []*Hold
	for i := range maxFreeSlots + 10 {
		held = append(held, mustAcquire(t, l, "k"+strconv.Itoa(i), ""))
	}
	for _, h := range held {
		h.End()
	}
	if n := len(l.keys.free); n != maxFreeSlots || len(l.keys.groups) != 0 {
		t.Errorf("%d free slots and %d keys after every call ended, want %d and 0", n, len(l.keys.groups), maxFreeSlots)
	}
}
