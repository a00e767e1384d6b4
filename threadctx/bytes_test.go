package threadctx

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/principal"
)

// TestMaxBytesPerOwner (issue 31): instances charged bytes count against
// their owner's MaxBytesPerOwner; past it the owner's least recently used
// idle one is evicted (saying so), with none idle Acquire fails with
// ErrCapacity, and another owner is untouched. Instances charged nothing
// are neither counted nor evicted for bytes.
func TestMaxBytesPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ff := newFixture(t, &Options{MaxBytesPerOwner: 2 << 20})
		alice := principal.With(t.Context(), &principal.Identity{Name: "alice"})
		bob := principal.With(t.Context(), &principal.Identity{Name: "bob"})
		sized := ff.spec(false)
		sized.Bytes = 1 << 20
		get := func(ctx context.Context, thread string, spec Spec) *Lease {
			t.Helper()
			l, err := p.Acquire(ctx, thread, "k", spec)
			if err != nil {
				t.Fatalf("Acquire(%s) = %v", thread, err)
			}
			return l
		}
		get(alice, "plain", ff.spec(false)).Release() // charged nothing
		get(alice, "a", sized).Release()
		time.Sleep(time.Second)
		get(alice, "b", sized).Release()
		time.Sleep(time.Second)
		get(bob, "x", sized).Release()
		get(alice, "c", sized).Release() // evicts a, alice's oldest sized one
		if got := p.Len(); got != 4 {
			t.Errorf("Len() = %d, want 4 (plain, b, c of alice's; x of bob's)", got)
		}
		l := get(alice, "a", sized) // a again: evicts b, and says a was evicted
		ev, ok := l.Evicted()
		if !ok || ev.Reason != EvictedForRoom || ev.MaxBytes != 2<<20 {
			t.Errorf("a's new lease: Evicted() = %+v, %v; want for room, naming MaxBytes", ev, ok)
		}
		held := get(alice, "c", sized)
		_, err := p.Acquire(alice, "d", "k", sized)
		if !errors.Is(err, ErrCapacity) || !strings.Contains(err.Error(), "threads.max_bytes_per_principal") {
			t.Errorf("Acquire with alice's sized instances all leased = %v, want ErrCapacity naming the setting", err)
		}
		l.Release()
		held.Release()
		big := ff.spec(false)
		big.Bytes = 3 << 20
		if _, err := p.Acquire(bob, "y", "k", big); !errors.Is(err, ErrCapacity) {
			t.Errorf("Acquire of an instance larger than the bound = %v, want ErrCapacity", err)
		}
		if got := p.Len(); got != 4 {
			t.Errorf("Len() = %d, want 4", got)
		}
	})
}
