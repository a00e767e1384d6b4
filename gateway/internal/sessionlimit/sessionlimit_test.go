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
