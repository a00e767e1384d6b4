package retry

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/retry/retrytest"
)

func TestBackendsGet(t *testing.T) {
	bs := NewBackends(BackendsConfig{})
	a := bs.Get("rest:a")
	if a == nil || a.Name() != "rest:a" {
		t.Fatalf("Get(rest:a) = %v, want a backend named rest:a", a)
	}
	if bs.Get("rest:a") != a {
		t.Error("Get returned a new backend for a known name")
	}
	if bs.Get("rest:b") == a {
		t.Error("Get returned the same backend for two names")
	}
	if a.Breaker() == nil || a.Budget() == nil {
		t.Error("a default backend has no breaker or no budget")
	}
}

func TestBackendsGetConcurrent(t *testing.T) {
	bs := NewBackends(BackendsConfig{})
	const n = 32
	got := make([]*Backend, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i] = bs.Get("up:x")
		})
	}
	close(start)
	wg.Wait()
	for i, b := range got {
		if b != got[0] {
			t.Fatalf("Get #%d returned a different backend: one name, two backends", i)
		}
	}
}

func TestBackendsStates(t *testing.T) {
	clock := retrytest.NewClock()
	var calls []string
	bs := NewBackends(BackendsConfig{
		Breaker: BreakerConfig{Failures: 1},
		Now:     clock.Now,
		OnState: func(b string, s State) { calls = append(calls, b+"="+s.String()) },
	})
	bs.Get("ok")
	p, err := bs.Get("down").Admit(1)
	if err != nil {
		t.Fatal(err)
	}
	p.Record(errRefused)
	want := map[string]State{"ok": StateClosed, "down": StateOpen}
	if diff := cmp.Diff(want, bs.States()); diff != "" {
		t.Errorf("States() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"down=open"}, calls); diff != "" {
		t.Errorf("OnState calls mismatch (-want +got):\n%s", diff)
	}
	if got := bs.Get("down").State(); got != StateOpen {
		t.Errorf("Backend.State() = %v, want open", got)
	}
}

func TestBackendAdmitCountsFirstAttempts(t *testing.T) {
	clock := retrytest.NewClock()
	bs := NewBackends(BackendsConfig{Budget: BudgetConfig{MinRetries: -1, Ratio: 1}, Now: clock.Now})
	b := bs.Get("b")
	for _, attempt := range []int{1, 2, 3, 1} {
		p, err := b.Admit(attempt)
		if err != nil {
			t.Fatal(err)
		}
		p.Record(nil)
	}
	// Two first attempts earn two retries at ratio 1; the retries
	// admitted (attempts 2 and 3) earned nothing.
	granted := 0
	for range 5 {
		if b.TryRetry() {
			granted++
		}
	}
	if granted != 2 {
		t.Errorf("TryRetry granted %d, want 2", granted)
	}
}

func TestBackendAdmitRefusedIsNotACall(t *testing.T) {
	clock := retrytest.NewClock()
	bs := NewBackends(BackendsConfig{Breaker: BreakerConfig{Failures: 1}, Budget: BudgetConfig{MinRetries: -1, Ratio: 1}, Now: clock.Now})
	b := bs.Get("b")
	p, _ := b.Admit(1)
	p.Record(errRefused) // opens; this call earned one retry
	for range 5 {
		if _, err := b.Admit(1); !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("Admit on an open breaker = %v, want a refusal", err)
		}
	}
	if !b.TryRetry() || b.TryRetry() {
		t.Error("refused first attempts earned retries")
	}
}

func TestBackendsDisabled(t *testing.T) {
	bs := NewBackends(BackendsConfig{Breaker: BreakerConfig{Disabled: true, Failures: 1}, Budget: BudgetConfig{Disabled: true}})
	b := bs.Get("b")
	if b.Breaker() != nil || b.Budget() != nil {
		t.Errorf("disabled breaker and budget: Breaker() = %v, Budget() = %v, want nil", b.Breaker(), b.Budget())
	}
	for range 50 {
		p, err := b.Admit(1)
		if err != nil {
			t.Fatalf("Admit() = %v with breakers disabled", err)
		}
		p.Record(errRefused)
		if !b.TryRetry() {
			t.Fatal("TryRetry() = false with budgets disabled")
		}
	}
}

func TestNilBackendAndBackends(t *testing.T) {
	var bs *Backends
	b := bs.Get("x")
	if b != nil {
		t.Fatalf("nil Backends.Get = %v, want nil", b)
	}
	if len(bs.States()) != 0 {
		t.Error("nil Backends.States() not empty")
	}
	p, err := b.Admit(1)
	if err != nil {
		t.Fatalf("nil Backend.Admit() = %v", err)
	}
	p.Record(errRefused)
	if !b.TryRetry() || b.Name() != "" || b.State() != StateClosed || b.Breaker() != nil || b.Budget() != nil {
		t.Error("nil Backend is not a no-op")
	}
}
