package sessionlimit

import (
	"errors"
	"sync"
	"testing"
)

// The caps hold under concurrent reservations, a slot is taken or given
// back once, and a principal whose sessions all ended is forgotten.
func TestLimits(t *testing.T) {
	l := New(5, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slots []*Slot
	for range 20 {
		wg.Go(func() {
			if sl, err := l.Reserve("alice"); err == nil {
				mu.Lock()
				slots = append(slots, sl)
				mu.Unlock()
			} else if !errors.Is(err, ErrPrincipalFull) {
				t.Errorf("alice refused with %v, want ErrPrincipalFull", err)
			}
		})
	}
	wg.Wait()
	if len(slots) != 2 || l.Live() != 2 {
		t.Fatalf("%d slots for alice, %d live; want 2 and 2", len(slots), l.Live())
	}
	owner, ok := slots[0].Take()
	if !ok || owner == nil {
		t.Fatal("Take of a fresh slot failed")
	}
	if _, ok := slots[0].Take(); ok {
		t.Error("a slot was taken twice")
	}
	slots[0].Release() // taken: nothing given back
	slots[1].Release()
	if l.Live() != 1 {
		t.Errorf("%d live after one release, want 1", l.Live())
	}
	for range 4 {
		if _, err := l.Reserve(""); err != nil {
			t.Fatalf("a reservation without a principal: %v", err)
		}
	}
	if _, err := l.Reserve(""); !errors.Is(err, ErrFull) {
		t.Errorf("a sixth session: %v, want ErrFull", err)
	}
	l.Ended(owner)
	if n := l.Principals(); n != 0 {
		t.Errorf("%d principals kept after alice's last session ended, want 0", n)
	}
}

// TestSetPerPrincipal: a raised cap lets a principal at the old one open
// more; a lowered one refuses it until it is under the new cap; limits
// built without a per-principal cap stay without.
func TestSetPerPrincipal(t *testing.T) {
	l := New(100, 1)
	if _, err := l.Reserve("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve("alice"); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("a second session under cap 1: %v, want ErrPrincipalFull", err)
	}
	l.SetPerPrincipal(3)
	var last *Slot
	for i := range 2 {
		sl, err := l.Reserve("alice")
		if err != nil {
			t.Fatalf("session %d under the raised cap 3: %v", i+2, err)
		}
		last = sl
	}
	l.SetPerPrincipal(2)
	if _, err := l.Reserve("alice"); !errors.Is(err, ErrPrincipalFull) || l.PerPrincipal() != 2 {
		t.Errorf("a fourth session under the lowered cap %d: %v, want ErrPrincipalFull", l.PerPrincipal(), err)
	}
	last.Release()
	last, _ = l.Reserve("alice") // 2 of 2 again after one ended: still full
	if last != nil {
		t.Error("a third session was let in at the lowered cap of 2")
	}
	open := New(100, 0)
	open.SetPerPrincipal(1)
	for range 3 {
		if _, err := open.Reserve("bob"); err != nil || open.PerPrincipal() != 0 {
			t.Fatalf("limits without a per-principal cap: %v, cap %d", err, open.PerPrincipal())
		}
	}
}
